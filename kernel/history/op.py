"""One line of the history, and what its micro-ops say.

The model is Jepsen's (`jepsen.tests.kafka`): a client process *invokes* an op and later completes
it with exactly one of `ok` (it happened), `fail` (it certainly did not happen) or `info` (we do not
know: a timeout, a lost connection). Nemesis ops carry `"process": "nemesis"`.

Client ops (`f`) and their values:
- `send`, `poll`, `txn`: a list of micro-ops. On invoke `["send", k, v]` and `["poll"]`; on ok
  `["send", k, [offset, v]]` (offset null if the client could not learn it) and
  `["poll", {"k": [[offset, v], ...]}]`. A fail/info completion repeats the invoke's micro-ops.
  `send` ops hold only sends, `poll` ops only polls, `txn` any mix (Jepsen's transactions, and
  our multi-micro-op ops).
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
CLIENT_FS = frozenset({"send", "poll", "txn", "assign", "subscribe"})
MOP_FS = frozenset({"send", "poll", "txn"})
KEY_FS = frozenset({"assign", "subscribe"})


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
    """One send micro-op: `offset` is known only for an acknowledged (`ok`) send that learnt it."""

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
    pos: int  # position within this key's list in the poll


def micro_ops(op: Op) -> list[list[Any]]:
    """The op's micro-ops (empty for assign/subscribe and nemesis ops)."""
    if not op.is_client or op.f not in MOP_FS or not isinstance(op.value, list):
        return []
    return op.value


def writes(op: Op) -> list[Write]:
    """The sends of an op. On `ok` the offsets come from the completion; otherwise they are unknown."""
    out = []
    for pos, m in enumerate(micro_ops(op)):
        if m[0] != "send":
            continue
        arg = m[2]
        if isinstance(arg, list):
            out.append(Write(m[1], arg[1], arg[0] if op.type is OpType.OK else None, pos))
        else:
            out.append(Write(m[1], arg, None, pos))
    return out


def reads(op: Op) -> Iterator[Read]:
    """Every record an `ok` op's polls returned, key by key, in the order the poll returned them."""
    if op.type is not OpType.OK:
        return
    for m in micro_ops(op):
        if m[0] == "poll" and len(m) > 1:
            for k, pairs in m[1].items():
                for pos, (offset, value) in enumerate(pairs):
                    yield Read(int(k), offset, value, pos)


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
