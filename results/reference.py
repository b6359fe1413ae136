"""A plain single-process Python reference of the anomaly definitions, for the benchmark and as a cross-check.

Why it exists: `make bench-check` (`results.bench`) times it on the same histories as our Spark check
and prints the ratio, so we know what Spark costs us at each size against the simplest honest
alternative; and `tests/checks/test_reference.py` runs it on the checks corpus without starting
Spark, so the definitions are stated twice, once as SQL and once as loops, and must agree. It is
**not** used by `chaos check`: the verdict always comes from `results.check` (Spark).

What it computes is `results.anomalies.DEFINITIONS` over the keyed table of `results.frames`, for
one history: the same rows (`kernel.history.columns.FACTS`: sends and records polled by completions
of any outcome, the keys an assign/subscribe keeps, the keys a rebalance names), the same version
order per key (every offset a poll of any outcome returned or a send that must have committed
learned — ok, or info with a value read by an ok poll — sorted, gaps removed: `idx`), the same
`vidx` (a value's highest index), `at`, `polled` (by an ok poll), `sent`, `failed_at`,
`max_read_idx` (of ok polls), the same rule for when a process's previous op on a key still counts
(its previous ok poll, or any previous send op, and the key stayed assigned), and the same ww and wr
edges for the cycle search, derived here in Python and searched by the same `results.cycles`. It
reads the history only through the project's reader (`read_ops`, `pairs`, `writes`, `reads`), which
validates every line as `chaos check` does before Spark starts. Two passes: one over the ops,
building plain dicts and lists per key; then one over what was kept, once every key's version order
is known. The returned counts are rows of the SQL groups (one per send, record, op pair, (key,
offset) or (key, value), as each definition says; for cycles, `results.cycles`' counts), only for
anomalies found.

What it leaves out:
- replica dumps (`replicas/`): no `divergent-replicas`, and `inconsistent-offsets` sees only sends
  and polls, not the replicas' committed logs;
- the commit checks of subscribing consumers (`results.commits`: commit-regression, ...);
- elle-cli, the perf facts, examples, and the verdict (bad types, drains).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernel.history import OpType, assigned_keys, pairs, read_ops, reads, rebalanced_keys, writes
from kernel.history.op import KEY_FS, MOP_FS

DONE = (OpType.OK, OpType.INFO)
#: a record as the order checks need it: (offset in the version order or None, value)
Row = tuple[int | None, int]


@dataclass
class Keyed:
    """What pass 1 learns of one key (the SQL's windows over the key's partition)."""

    value_at: dict[int, int] = field(default_factory=dict)  # offset -> first value seen there
    values_at: defaultdict[int, set[int]] = field(default_factory=lambda: defaultdict(set))  # offset -> all
    top_offset: dict[int, int] = field(default_factory=dict)  # value -> highest offset it was seen at
    inconsistent: set[int] = field(default_factory=set)  # offsets seen with more than one value
    duplicate: set[int] = field(default_factory=set)  # values seen at more than one offset
    polled: set[int] = field(default_factory=set)  # values an ok poll returned
    sent: set[int] = field(default_factory=set)  # any send micro-op: ok, fail, info or unfinished
    failed: set[int] = field(default_factory=set)  # values with a send that ended `fail`
    writer: dict[int, int] = field(default_factory=dict)  # value -> the last op (index) that sent it
    max_read: int | None = None  # highest offset an ok poll returned
    idx: dict[int, int] = field(default_factory=dict)  # pass 2: offset -> index in the version order

    def observe(self, offset: int, value: int) -> None:
        """An offset in the version order: a poll's record, or a committed send's."""
        old = self.value_at.setdefault(offset, value)
        self.values_at[offset].add(value)
        if old != value:
            self.inconsistent.add(offset)
        top = self.top_offset.get(value)
        if top is None or offset > top:
            self.top_offset[value] = offset
        if top is not None and top != offset:
            self.duplicate.add(value)

    def index(self) -> None:
        self.idx = {o: i for i, o in enumerate(sorted(self.value_at))}

    def at(self, row: Row) -> int | None:
        """The SQL's `at`: the offset's index, else the value's (`vidx`), else None (never placed)."""
        offset, value = row
        if offset is None:
            offset = self.top_offset.get(value)
            if offset is None:
                return None
        return self.idx[offset]


@dataclass
class Span:
    """A process's op on a key, as `results.anomalies._spans` sees it: its first and last record,
    and the counts that say whether the key stayed assigned since the process's previous op."""

    first: Row
    last: Row
    n_assign: int
    keeps: int
    resets: int


@dataclass
class Send:
    """One send micro-op of a completion (or of an invoke that never completed)."""

    key: int
    offset: int | None
    value: int
    op: int  # the completion's index
    typ: OpType


@dataclass
class Pass1:
    keys: defaultdict[int, Keyed] = field(default_factory=lambda: defaultdict(Keyed))
    sends: list[Send] = field(default_factory=list)
    poll_records: list[tuple[int, int, int, int, OpType]] = field(default_factory=list)  # key, offset, value, op, type
    read_lists: list[tuple[int, list[Row], bool]] = field(default_factory=list)  # (key, records, rebalanced)
    send_lists: list[tuple[int, list[Send]]] = field(default_factory=list)  # any op's sends to one key
    poll_pairs: list[tuple[int, Row, Row]] = field(default_factory=list)  # (key, previous op's last, first)
    send_pairs: list[tuple[int, list[Send], list[Send]]] = field(default_factory=list)
    own_reads: int = 0  # records a transaction polled of its own sends (precommitted-read)
    ops: list[tuple[int, int, bool]] = field(default_factory=list)  # (completion, invoke, ok) of send/poll/txn ops
    n_mop: int = 0  # send/poll/txn ops invoked (none: empty-transaction-graph)
    # per process: assign/subscribe completions (ok or info); per (process, key): keeps, resets
    n_assign: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    keeps: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    resets: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    last_poll: dict[tuple[str, int], Span] = field(default_factory=dict)
    last_send: dict[tuple[str, int], tuple[Span, list[Send]]] = field(default_factory=dict)


def _stayed(prev: Span, span: Span) -> bool:
    """The key stayed assigned between the two ops: every assign/subscribe since kept it, and no
    rebalance named it."""
    return span.n_assign - prev.n_assign <= span.keeps - prev.keeps and span.resets == prev.resets


def pass1(ops: Iterable[Any]) -> Pass1:
    """One walk over the (invoke, completion) pairs: a process's ops come in index order."""
    s = Pass1()
    keys = s.keys
    for inv, comp in pairs(ops):
        proc = str(inv.process)
        typ = comp.type if comp is not None else OpType.INFO  # never completed: unknown
        if comp is not None and typ in DONE:
            if inv.f in KEY_FS:
                s.n_assign[proc] += 1
                for k in assigned_keys(comp):
                    s.keeps[(proc, k)] += 1
            for k in rebalanced_keys(comp):  # before this op's own records, as the SQL orders them
                s.resets[(proc, k)] += 1
        if inv.f not in MOP_FS:
            continue
        s.n_mop += 1
        op = comp if comp is not None else inv
        if comp is not None:
            s.ops.append((comp.index, inv.index, typ is OpType.OK))
        n_assign = s.n_assign[proc]
        by_key: dict[int, list[Send]] = {}
        for w in writes(op):
            kd = keys[w.key]
            kd.sent.add(w.value)
            kd.writer[w.value] = max(kd.writer.get(w.value, -1), op.index)
            if typ is OpType.FAIL:
                kd.failed.add(w.value)
            send = Send(w.key, w.offset, w.value, op.index, typ)
            s.sends.append(send)
            by_key.setdefault(w.key, []).append(send)
        for k, sends in by_key.items():
            s.send_lists.append((k, sends))
            if typ in DONE:  # nonmonotonic-send: ok and info ops, each a process's latest send
                span = Span((None, 0), (None, 0), n_assign, s.keeps[(proc, k)], 0)  # sends ignore rebalances
                prev = s.last_send.get((proc, k))
                if prev is not None and _stayed(prev[0], span):
                    s.send_pairs.append((k, prev[1], sends))
                s.last_send[(proc, k)] = (span, sends)
        got: dict[int, list[Row]] = {}
        for r in reads(op):
            kd = keys[r.key]
            s.poll_records.append((r.key, r.offset, r.value, op.index, typ))
            if typ is OpType.OK:
                kd.polled.add(r.value)
                if kd.max_read is None or r.offset > kd.max_read:
                    kd.max_read = r.offset
            got.setdefault(r.key, []).append((r.offset, r.value))
            s.own_reads += any(x.value == r.value for x in by_key.get(r.key, ()))
        rb = rebalanced_keys(op)
        for k, rows in got.items():
            s.read_lists.append((k, rows, k in rb))
            span = Span(rows[0], rows[-1], n_assign, s.keeps[(proc, k)], s.resets[(proc, k)])
            prev_poll = s.last_poll.get((proc, k))
            if prev_poll is not None and _stayed(prev_poll, span):
                s.poll_pairs.append((k, prev_poll.last, span.first))
            if typ is OpType.OK:  # only an ok poll moves the consumer on (Jepsen's rule)
                s.last_poll[(proc, k)] = span
    return s


def _committed(s: Pass1) -> set[int]:
    """Ops whose sends must have committed: ok, or info with a value some ok poll read."""
    ok = {x.op for x in s.sends if x.typ is OpType.OK}
    proven = {x.op for x in s.sends if x.typ is OpType.INFO and x.value in s.keys[x.key].polled}
    return ok | proven


def _between(keys: dict[int, Keyed], found: dict[str, int], span_pairs: list[tuple[int, Row, Row]],
             skip: str | None, rewind: str) -> None:
    """Successive ops of a process on a key: the next op's first index against the previous op's last."""
    for k, prev, cur in span_pairs:
        kd = keys[k]
        a, b = kd.at(prev), kd.at(cur)
        if a is None or b is None:
            continue
        if b <= a:
            found[rewind] += 1
        elif skip is not None and b > a + 1:
            found[skip] += 1


def _within(kd: Keyed, rows: list[Row], found: dict[str, int], skip: str, rewind: str) -> None:
    """Consecutive records of one op on one key."""
    prev = None
    for row in rows:
        cur = kd.at(row)
        if prev is not None and cur is not None:
            if cur > prev + 1:
                found[skip] += 1
            elif cur <= prev:
                found[rewind] += 1
        prev = cur


def _edges(s: Pass1) -> tuple[list[int], list[int], list[int]]:
    """The ww and wr edges of `results.anomalies.EDGES`, from the same definitions."""
    from results.cycles import WR, WW

    pairs_: set[tuple[int, int, int]] = set()
    for k, _offset, value, op, _typ in s.poll_records:
        w = s.keys[k].writer.get(value)
        if w is not None and w != op:
            pairs_.add((w, op, WR))
    for kd in s.keys.values():
        order = sorted(kd.value_at)
        chosen = [min(kd.values_at[o]) for o in order]
        for value, w in kd.writer.items():
            top = kd.top_offset.get(value)
            if top is None:
                continue
            i = kd.idx[top]
            if i == 0:
                continue
            prev = kd.writer.get(chosen[i - 1])
            if prev is not None and prev != w:
                pairs_.add((prev, w, WW))
    got = sorted(pairs_)
    return [a for a, _, _ in got], [b for _, b, _ in got], [r for _, _, r in got]


def anomalies(path: Path) -> dict[str, int]:
    """anomaly type -> count for the history at `path` (only anomalies found, in report order)."""
    from results.anomalies import CHECKERS
    from results.cycles import Ops, build, find_cycles

    s = pass1(read_ops(path))
    if not s.n_mop:
        return {"empty-transaction-graph": 1}
    keys = s.keys
    committed = _committed(s)
    for x in s.sends:
        if x.offset is not None and x.op in committed:
            keys[x.key].observe(x.offset, x.value)
    for k, offset, value, _op, _typ in s.poll_records:
        keys[k].observe(offset, value)
    for kd in keys.values():
        kd.index()
    found: dict[str, int] = defaultdict(int)

    def row(x: Send) -> Row:
        return (x.offset if x.offset is not None and x.op in committed else None, x.value)

    for x in s.sends:
        kd = keys[x.key]
        if x.value in kd.polled:
            continue
        at = kd.at(row(x))
        lost = at is not None and kd.max_read is not None and at < kd.idx[kd.max_read]
        if lost and x.op in committed:
            found["lost-write"] += 1
        elif not lost and x.typ is OpType.OK:
            found["unseen"] += 1
    for kd in keys.values():
        found["inconsistent-offsets"] += len(kd.inconsistent)
        found["duplicate"] += len(kd.duplicate)
    for k, _offset, value, _op, typ in s.poll_records:
        kd = keys[k]
        if value not in kd.sent:
            found["unexpected"] += 1
        elif typ is OpType.OK and value in kd.failed:
            found["G1a"] += 1
    found["precommitted-read"] += s.own_reads
    for k, rows, rebalanced in s.read_lists:
        if not rebalanced:
            _within(keys[k], rows, found, "int-poll-skip", "int-nonmonotonic-poll")
    _between(keys, found, s.poll_pairs, "poll-skip", "nonmonotonic-poll")
    _between(keys, found, [(k, row(a[-1]), row(b[0])) for k, a, b in s.send_pairs], None, "nonmonotonic-send")
    for k, sends in s.send_lists:
        _within(keys[k], [row(x) for x in sends], found, "int-send-skip", "int-nonmonotonic-send")
    src, dst, rel = _edges(s)
    ops = np.array(s.ops, dtype=np.int64).reshape(-1, 3)
    for name, f in find_cycles(build(np.array(src), np.array(dst), np.array(rel),
                                     Ops(ops[:, 0], ops[:, 1], ops[:, 2].astype(bool)))).items():
        found[name] += f.count
    return {name: found[name] for name in CHECKERS if found.get(name)}


def main(argv: list[str]) -> int:
    """`python -m results.reference HISTORY...`: each history's counts and the seconds they took."""
    if not argv:
        print("usage: python -m results.reference HISTORY.jsonl...", file=sys.stderr)
        return 2
    for name in argv:
        t = time.perf_counter()
        got = anomalies(Path(name))
        print(f"{name}: {got} ({time.perf_counter() - t:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
