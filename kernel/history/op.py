"""One line of the history, and what its micro-ops say.

The model is Jepsen's (`jepsen.tests.kafka`): a client process *invokes* an op and later completes
it with exactly one of `ok` (it happened), `fail` (it certainly did not happen) or `info` (we do not
know: a timeout, a lost connection). Nemesis ops carry `"process": "nemesis"`.

Client ops (`f`) and their values (the whole of Jepsen's model, `kafka.clj`; README.md beside this file):
- `send`, `poll`, `txn`: a list of micro-ops. On invoke `["send", k, v]` and `["poll"]`. On every
  completion — ok, info or fail — the same sends, each `["send", k, [offset, v]]` when the client
  learned the offset, else `["send", k, v]` or `["send", k, [null, v]]` (Jepsen writes all three, even
  on ok), and polls as `["poll", {"k": [[offset, v], ...]}]` (or `["poll"]` when a poll returned no
  result map). Its polls need not match the invoke's one for one (Jepsen's own tests complete one
  `["poll"]` with two results); its sends must (`schema.check_completion`). An info or fail
  completion still carries what it read and wrote: that is how Jepsen sees aborted and
  indeterminate reads, and a transaction's offsets. `send` ops hold only sends, `poll` ops only
  polls, `txn` any mix.
- `assign`, `subscribe`: a list of keys (Kafka's `assign`/`subscribe`). A `subscribe` joins the
  run's consumer group; one with `"rejoin": true` leaves the group first (a new consumer joins).
Keys are integers (one key = one topic-partition); values are unique integers per run.

Extra fields of a subscribing consumer's completions (the workload's `sub_via` is `subscribe`):
- `"rebalance-log": [{"revoked": [keys], "assigned": [keys]}, ...]` on a poll: the rebalances that
  happened during that poll call, in order, before its records were returned (on a rejoining
  `subscribe`: the old consumer's revocation as it left);
- `"commits": {"k": next offset, ...}` on a poll: the offsets it committed (synchronously, after
  reading) and the coordinator acknowledged; `"commit-error": "..."` when a commit was refused or
  its outcome is unknown. `commits(op)` reads them;
- `"fetched-commits": {"k": next offset, ...}` on a poll: the group's committed offsets of the keys
  the consumer held, fetched from the coordinator (OffsetFetch) at the start of the poll, before it
  read or committed anything; keys with no commit yet are left out. `fetched_commits(op)` reads
  them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

NEMESIS = "nemesis"
MOP_FS = frozenset({"send", "poll", "txn"})
KEY_FS = frozenset({"assign", "subscribe"})
#: client ops of Jepsen's workload that carry no micro-ops and that no check reads: `crash` (the
#: client is torn down and replaced; it completes `info`) and `debug-topic-partitions` (the final
#: polls' look at the partitions' state); their value is free-form
OTHER_FS = frozenset({"crash", "debug-topic-partitions"})
CLIENT_FS = MOP_FS | KEY_FS | OTHER_FS


class OpType(StrEnum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


Process = int | str


@dataclass(frozen=True, slots=True)
class Op:
    """One line of the history. `extra` holds optional keys (`final`, `error`, `fault`, `node`, ...)."""

    index: int
    time: int
    process: Process
    type: OpType
    f: str
    value: Any
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS

    @property
    def final(self) -> bool:
        return self.extra.get("final") is True

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": str(self.type),
            "f": self.f,
            "value": self.value,
        }
        d.update(self.extra)
        return d


@dataclass(frozen=True, slots=True)
class Write:
    """One send micro-op: `offset` is the one its line gives, or None."""

    key: int
    value: int
    offset: int | None
    pos: int  # position among the op's micro-ops


@dataclass(frozen=True, slots=True)
class Read:
    """One record a poll returned."""

    key: int
    offset: int
    value: int
    pos: int  # position among the op's records of this key (across all its polls)


def micro_ops(op: Op) -> list[list[Any]]:
    """The op's micro-ops (empty for assign/subscribe and nemesis ops)."""
    if not op.is_client or op.f not in MOP_FS or not isinstance(op.value, list):
        return []
    return op.value


def writes(op: Op) -> list[Write]:
    """The sends of an op, with the offset its line gives (None where it gives none). Which offsets
    count is the checks' business: Jepsen trusts an ok op's, and an info op's once one of its sends
    was read (it committed), never a failed one's."""
    out = []
    for pos, m in enumerate(micro_ops(op)):
        if m[0] != "send":
            continue
        arg = m[2]
        if isinstance(arg, list):
            out.append(Write(m[1], arg[1], arg[0], pos))
        else:
            out.append(Write(m[1], arg, None, pos))
    return out


def reads(op: Op) -> Iterator[Read]:
    """Every record a completion's polls returned (ok, info or fail alike: Jepsen's `op-reads`), key by
    key, in the order the op returned them; `pos` counts a key's records across all the op's polls.
    Callers that trust only committed reads filter on `op.type`."""
    if op.type is OpType.INVOKE:
        return
    seen: dict[int, int] = {}
    for m in micro_ops(op):
        if m[0] == "poll" and len(m) > 1 and m[1]:
            for k, pairs in m[1].items():
                key = int(k)
                start = seen.get(key, 0)
                for pos, (offset, value) in enumerate(pairs, start):
                    yield Read(key, offset, value, pos)
                seen[key] = start + len(pairs)


def assigned_keys(op: Op) -> list[int]:
    """The keys of an assign/subscribe op."""
    return list(op.value) if op.is_client and op.f in KEY_FS else []


def rebalanced_keys(op: Op) -> set[int]:
    """Every key a completion's rebalance log names: revoked, assigned, or (Jepsen's) `keys`."""
    out: set[int] = set()
    for event in op.extra.get("rebalance-log") or ():
        for name in ("revoked", "assigned", "keys"):
            out.update(event.get(name) or ())
    return out


def fetched_commits(op: Op) -> dict[int, int]:
    """The committed offsets a poll fetched before reading: key → the next offset to read. Any
    completion may carry them (the fetch is a fact even when the poll's outcome is unknown)."""
    got = op.extra.get("fetched-commits") if op.is_client and op.type is not OpType.INVOKE else None
    return {int(k): int(v) for k, v in got.items()} if isinstance(got, dict) else {}


def commits(op: Op) -> dict[int, int]:
    """The acknowledged offset commits an `ok` poll carries: key → the next offset to read."""
    got = op.extra.get("commits") if op.is_client and op.type is OpType.OK else None
    return {int(k): int(v) for k, v in got.items()} if isinstance(got, dict) else {}


def is_ctp(op: Op) -> bool:
    """A consume-transform-produce transaction (`"ctp": true`): its sends are decided by its reads."""
    return op.is_client and op.extra.get("ctp") is True


def _offsets(op: Op, field: str) -> dict[int, int]:
    got = op.extra.get(field) if op.is_client and op.type is not OpType.INVOKE else None
    return {int(k): int(v) for k, v in got.items()} if isinstance(got, dict) else {}


def ctp_sources(op: Op) -> list[tuple[int, int]]:
    """A ctp completion's input records, (key, offset), one per send in order: what each send
    transforms."""
    got = op.extra.get("sources") if is_ctp(op) and op.type is not OpType.INVOKE else None
    return [(int(k), int(o)) for k, o in got] if isinstance(got, list) else []


def txn_offsets(op: Op) -> dict[int, int]:
    """The group offsets a ctp transaction added to itself (key → the next offset to read), whatever
    its outcome: they became the group's only if it committed."""
    return _offsets(op, "offsets") if is_ctp(op) else {}


def group_offsets(op: Op) -> dict[int, int]:
    """The group's committed offsets as a final op read them after every transaction had ended."""
    return _offsets(op, "group-offsets")


def fenced(op: Op) -> bool:
    """A completion whose producer was fenced (a newer one took its transactional id): its
    transaction was aborted by the coordinator, whatever the producer had sent."""
    return op.extra.get("fenced") is True and op.type is not OpType.INVOKE
