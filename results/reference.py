"""A plain single-process Python reference of the anomaly definitions, for the benchmark and as a cross-check.

Why it exists: `make bench-check` (`results.bench`) times it on the same histories as our Spark check
and prints the ratio, so we know what Spark costs us at each size against the simplest honest
alternative; and `tests/checks/test_reference.py` runs it on the checks corpus without starting
Spark, so the definitions are stated twice, once as SQL and once as loops, and must agree. It is
**not** used by `chaos check`: the verdict always comes from `results.check` (Spark).

What it computes is `results.anomalies.DEFINITIONS` over the keyed table of `results.frames`, for
one history: the same rows (`kernel.history.columns.FACTS`: sends, records polled, the keys an
assign/subscribe keeps, the keys a rebalance names), the same version order per key (every offset
observed by an acknowledged send or a poll, sorted, gaps removed: `idx`), the same `vidx` (a
value's highest index), `at`, `polled`, `sent`, `failed_at`, `max_read_idx`, and the same rule for
when a process's previous op on a key still counts (the key stayed assigned). It reads the history
only through the project's reader (`read_ops`, `pairs`, `writes`, `reads`), which validates every
line as `chaos check` does before Spark starts. Two passes: one over the ops, building plain dicts
and lists per key; then one over what was kept, once every key's version order is known. The
returned counts are rows of the SQL groups (one per send, record, op pair, (key, offset) or
(key, value), as each definition says), only for anomalies found.

What it leaves out:
- replica dumps (`replicas/`): no `divergent-replicas`, and `inconsistent-offsets` sees only sends
  and polls, not the replicas' committed logs;
- the commit checks of subscribing consumers (`results.commits`: commit-regression, ...);
- elle-cli's transactional cycles, the perf facts, examples, and the verdict (bad types, drains).
Where a txn polls one key twice, the SQL's order among the two lists' records is not defined (they
share positions); here they are taken in the order the op lists them.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel.history import OpType, assigned_keys, pairs, read_ops, reads, rebalanced_keys, writes
from kernel.history.op import KEY_FS

DONE = (OpType.OK, OpType.INFO)
#: a record as the order checks need it: (offset or None, value)
Row = tuple[int | None, int]


@dataclass
class Keyed:
    """What pass 1 learns of one key (the SQL's windows over the key's partition)."""

    value_at: dict[int, int] = field(default_factory=dict)  # offset -> first value seen there
    top_offset: dict[int, int] = field(default_factory=dict)  # value -> highest offset it was seen at
    inconsistent: set[int] = field(default_factory=set)  # offsets seen with more than one value
    duplicate: set[int] = field(default_factory=set)  # values seen at more than one offset
    polled: set[int] = field(default_factory=set)
    sent: set[int] = field(default_factory=set)  # any send micro-op: ok, fail, info or unfinished
    failed: set[int] = field(default_factory=set)  # values with a send that ended `fail`
    max_read: int | None = None  # highest offset any poll returned
    idx: dict[int, int] = field(default_factory=dict)  # pass 2: offset -> index in the version order

    def observe(self, offset: int, value: int) -> None:
        """A send acknowledged at `offset`, or a record polled there: it enters the version order."""
        old = self.value_at.setdefault(offset, value)
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
class Pass1:
    keys: defaultdict[int, Keyed] = field(default_factory=lambda: defaultdict(Keyed))
    acked: list[tuple[int, int, int]] = field(default_factory=list)  # (key, offset, value) of ok sends
    read_lists: list[tuple[int, list[Row], bool]] = field(default_factory=list)  # (key, records, rebalanced)
    send_lists: list[tuple[int, list[Row]]] = field(default_factory=list)  # ok/info sends of one op to a key
    poll_pairs: list[tuple[int, Row, Row]] = field(default_factory=list)  # (key, previous op's last, first)
    send_pairs: list[tuple[int, Row, Row]] = field(default_factory=list)
    # per process: assign/subscribe completions (ok or info); per (process, key): keeps, resets
    n_assign: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    keeps: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    resets: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    last_poll: dict[tuple[str, int], Span] = field(default_factory=dict)
    last_send: dict[tuple[str, int], Span] = field(default_factory=dict)


def _follow(last: dict[tuple[str, int], Span], out: list[tuple[int, Row, Row]], proc: str, key: int,
            span: Span) -> None:
    """Pair `span` with the process's previous op on the key if the key stayed assigned in between:
    every assign/subscribe completed since kept it, and no rebalance named it."""
    prev = last.get((proc, key))
    if (prev is not None and span.n_assign - prev.n_assign <= span.keeps - prev.keeps
            and span.resets == prev.resets):
        out.append((key, prev.last, span.first))
    last[(proc, key)] = span


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
        if inv.f in KEY_FS:
            continue
        n_assign = s.n_assign[proc]
        # sends (of any outcome: `sent`, `failed_at`); ok/info ones are the order checks' rows
        by_key: dict[int, list[Row]] = {}
        for w in writes(comp if comp is not None else inv):
            kd = keys[w.key]
            kd.sent.add(w.value)
            if typ is OpType.FAIL:
                kd.failed.add(w.value)
                continue
            if w.offset is not None:  # only an ok send knows its offset
                kd.observe(w.offset, w.value)
                s.acked.append((w.key, w.offset, w.value))
            by_key.setdefault(w.key, []).append((w.offset, w.value))
        for k, rows in by_key.items():
            s.send_lists.append((k, rows))
            span = Span(rows[0], rows[-1], n_assign, s.keeps[(proc, k)], 0)  # sends ignore rebalances
            _follow(s.last_send, s.send_pairs, proc, k, span)
        if comp is None or typ is not OpType.OK:
            continue
        # records polled
        got: dict[int, list[Row]] = {}
        for r in reads(comp):
            kd = keys[r.key]
            kd.observe(r.offset, r.value)
            kd.polled.add(r.value)
            if kd.max_read is None or r.offset > kd.max_read:
                kd.max_read = r.offset
            got.setdefault(r.key, []).append((r.offset, r.value))
        if not got:
            continue
        rb = rebalanced_keys(comp)
        for k, rows in got.items():
            s.read_lists.append((k, rows, k in rb))
            span = Span(rows[0], rows[-1], n_assign, s.keeps[(proc, k)], s.resets[(proc, k)])
            _follow(s.last_poll, s.poll_pairs, proc, k, span)
    return s


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


def anomalies(path: Path) -> dict[str, int]:
    """anomaly type -> count for the history at `path` (only anomalies found, in report order)."""
    from results.anomalies import CHECKERS

    s = pass1(read_ops(path))
    keys = s.keys
    for kd in keys.values():
        kd.index()
    found: dict[str, int] = defaultdict(int)
    for k, offset, value in s.acked:
        kd = keys[k]
        if value in kd.polled:
            continue
        if kd.max_read is not None and kd.idx[offset] < kd.idx[kd.max_read]:
            found["lost-write"] += 1
        else:
            found["unseen"] += 1
    for kd in keys.values():
        found["inconsistent-offsets"] += len(kd.inconsistent)
        found["duplicate"] += len(kd.duplicate)
    for k, rows, rebalanced in s.read_lists:
        kd = keys[k]
        for _, value in rows:
            if value not in kd.sent:
                found["unexpected"] += 1
            elif value in kd.failed:
                found["G1a"] += 1
        if not rebalanced:
            _within(kd, rows, found, "int-poll-skip", "int-nonmonotonic-poll")
    _between(keys, found, s.poll_pairs, "poll-skip", "nonmonotonic-poll")
    _between(keys, found, s.send_pairs, None, "nonmonotonic-send")
    for k, rows in s.send_lists:
        _within(keys[k], rows, found, "int-send-skip", "int-nonmonotonic-send")
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
