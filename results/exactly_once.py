"""Exactly-once, end to end: a check over consume-transform-produce (ctp) transactions.

A ctp transaction (`"ctp": true`, kernel/history/README.md "Exactly-once") polls input keys with a
consumer group, sends one output record for each input record it read (its `sources` name the
input of each send), and adds the group's next offsets to the same transaction (`offsets`), as
Kafka Streams does with `sendOffsetsToTransaction`. Kafka's promise is that the three go together:
an input record's output becomes visible (read_committed) exactly when the group's offset moves past
it. Jepsen's Kafka checker has no name for breaking it (its types stop at aborted reads, cycles and
the queue anomalies); these are ours:

- `ctp-processed-twice`: one input record's output is visible from two sends (two transactions
  processed it, or one did twice) — a zombie's transaction that committed after its successor's,
  or offsets that went back while the outputs stayed;
- `ctp-skipped-input`: an input record below the group's committed offset whose output never became
  visible — its offsets were committed without its output (judged only after a complete final drain,
  the only time "never visible" is known, and when every transaction is traced);
- `ctp-fenced-write-visible`: a visible output of a transaction whose producer was fenced: the
  coordinator aborted it when the successor took the transactional id, and its writes must stay
  invisible;
- `ctp-offsets-beyond-commit` / `ctp-offsets-behind-commit`: at the end, the group's committed
  offset of an input key (`group-offsets`, read by the final drain) is not where the last committed
  transaction left it: ahead (an aborted transaction's offsets made committed) or behind (a
  committed transaction's offsets lost).

"Visible" is read by anyone: every consumer reads read_committed, so what any poll returned had
committed. Values are unique per send, so a visible output names its send, and so its transaction and
input. One linear Python pass, run by `chaos check` for every history with a ctp transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kernel.history import (
    Op,
    OpType,
    ctp_sources,
    fenced,
    group_offsets,
    is_ctp,
    pairs,
    reads,
    txn_offsets,
    writes,
)

NAMES = ("ctp-processed-twice", "ctp-skipped-input", "ctp-fenced-write-visible", "ctp-offsets-beyond-commit",
         "ctp-offsets-behind-commit")


@dataclass(frozen=True, slots=True)
class Output:
    """One send of a ctp transaction: the output record and the input it transforms."""

    key: int
    value: int
    source: tuple[int, int]  # (input key, input offset)
    txn: int  # index of the transaction's completion
    process: Any
    outcome: str  # ok, info or fail
    fenced: bool

    def to_json(self, offset: int | None = None) -> dict[str, Any]:
        out = {"key": self.key, "value": self.value, "txn_index": self.txn, "process": self.process,
               "outcome": self.outcome}
        return out if offset is None else {**out, "offset": offset}


@dataclass
class _Pass:
    outputs: dict[int, Output]  # output value -> its send
    visible: dict[int, int]  # output value -> the offset it was read at (the first seen)
    inputs: set[tuple[int, int]]  # every input record any poll read, (key, offset)
    input_keys: set[int]
    settled: dict[int, list[tuple[int, str, int]]]  # input key -> (offset added, outcome, txn index)
    #: a ctp transaction that may have committed what the history does not say: never completed, or
    #: completed `info` without its offsets (a client that lost track of it)
    unknown: bool
    group_read: bool  # a final op read the group's offsets
    final_group: dict[int, int]


def _scan(ops: Iterable[Op]) -> _Pass:
    ops = list(ops)
    s = _Pass({}, {}, set(), set(), defaultdict(list), False, False, {})
    for inv, done in pairs(ops):
        if not is_ctp(inv):
            continue
        if done is None or (done.type is not OpType.FAIL and "offsets" not in done.extra):
            s.unknown = True
        if done is None:
            continue
        for w, src in zip(writes(done), ctp_sources(done), strict=True):
            s.outputs[w.value] = Output(w.key, w.value, src, done.index, done.process, done.type.value, fenced(done))
            s.input_keys.add(src[0])
        for k, o in txn_offsets(done).items():
            s.input_keys.add(k)
            s.settled[k].append((o, done.type.value, done.index))
    for op in ops:
        if op.type is OpType.INVOKE:
            continue
        for r in reads(op):
            if r.value in s.outputs:
                s.visible.setdefault(r.value, r.offset)
            if r.key in s.input_keys:
                s.inputs.add((r.key, r.offset))
        if op.final and "group-offsets" in op.extra:
            s.group_read = True
            s.final_group.update(group_offsets(op))
    return s


def processed_twice(s: _Pass) -> list[dict[str, Any]]:
    by_input: dict[tuple[int, int], list[Output]] = defaultdict(list)
    for v in sorted(s.visible, key=lambda v: s.outputs[v].txn):
        out = s.outputs[v]
        by_input[out.source].append(out)
    return [{"input": list(src), "first_index": outs[0].txn, "second_index": outs[1].txn,
             "outputs": [o.to_json(s.visible[o.value]) for o in outs]}
            for src, outs in sorted(by_input.items()) if len(outs) > 1]


def fenced_visible(s: _Pass) -> list[dict[str, Any]]:
    return [{**s.outputs[v].to_json(o), "input": list(s.outputs[v].source)}
            for v, o in sorted(s.visible.items(), key=lambda kv: s.outputs[kv[0]].txn) if s.outputs[v].fenced]


def _committed_through(s: _Pass) -> dict[int, int]:
    """How far each input key is certainly consumed: the highest offset an acknowledged transaction
    added, or the group's final offset, whichever is higher."""
    out = dict(s.final_group)
    for k, rows in s.settled.items():
        acked = [o for o, outcome, _ in rows if outcome == "ok"]
        if acked:
            out[k] = max(out.get(k, 0), *acked)
    return out


def skipped_inputs(s: _Pass) -> list[dict[str, Any]]:
    if s.unknown:  # an untraced transaction may have produced the outputs that look missing
        return []
    produced = {s.outputs[v].source for v in s.visible}
    through = _committed_through(s)
    return [{"input": [k, o], "committed-through": through[k]}
            for k, o in sorted(s.inputs) if o < through.get(k, 0) and (k, o) not in produced]


def group_offset_mismatches(s: _Pass) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(ahead, behind): a key whose final group offset is past every offset a transaction that may
    have committed added, or one only an aborted transaction added; and one below the last offset an
    acknowledged transaction added."""
    ahead: list[dict[str, Any]] = []
    behind: list[dict[str, Any]] = []
    if not s.group_read:
        return ahead, behind
    for k in sorted(s.settled):  # the input keys of ctp transactions; a key the group lacks is at 0
        g = s.final_group.get(k, 0)
        rows = s.settled[k]
        maybe = [o for o, outcome, _ in rows if outcome != "fail"]
        acked = [o for o, outcome, _ in rows if outcome == "ok"]
        row = {"key": k, "group-offset": g,
               "committed": max(acked, default=None),
               "aborted-with-it": [i for o, outcome, i in rows if outcome == "fail" and o == g]}
        if acked and g < max(acked):  # whatever an untraced transaction did: offsets never go back
            behind.append(row)
        elif not s.unknown and g not in maybe and g > max(acked, default=0):
            ahead.append(row)  # (an untraced transaction may have added any offset)
    return ahead, behind


def _findings(ops: Iterable[Op], drained: bool) -> list[tuple[str, list[dict[str, Any]]]]:
    s = _scan(ops)
    ahead, behind = group_offset_mismatches(s)
    return [("ctp-processed-twice", processed_twice(s)),
            ("ctp-skipped-input", skipped_inputs(s) if drained else []),
            ("ctp-fenced-write-visible", fenced_visible(s)),
            ("ctp-offsets-beyond-commit", ahead),
            ("ctp-offsets-behind-commit", behind)]


def exactly_once_anomalies(ops: Iterable[Op], examples: int, *, drained: bool) -> dict[str, dict[str, Any]]:
    """The exactly-once anomalies in results.json's shape ({type: {count, examples}}), absent when
    none. `drained`: a final drain read every key to its end and every op completed (else a skipped
    input is not judged: `chaos check` passes the history's own facts)."""
    return {name: {"count": len(rows), "examples": rows[:examples]}
            for name, rows in _findings(ops, drained) if rows}
