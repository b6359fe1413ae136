"""Committed offsets never go backwards: a check over a subscribe-mode history's acknowledged commits.

The run's consumer group commits, after each poll, the next offset of every key the poll read
(`kernel.history.commits`). A consumer that takes a key over starts where the group committed, so
once a commit of offset `o` for key `k` is acknowledged, any commit of `k` that begins later must be
at least `o`. A commit below that means the group's committed offset went backwards: a coordinator
that lost an acknowledged commit (a failover to a replica that did not have it), served an offset
that was never committed, or a consumer that restarted below it because its data was lost. Order is
real time, judged by the poll ops that carry the commits: commit X precedes commit Y when X's op
completed before Y's op was invoked; commits of concurrent ops are not ordered.

A commit lost by the coordinator is usually overwritten by the next one before anybody reads it, so
the regression check alone rarely sees it. The stronger check is where a consumer *starts*: a key
newly assigned to a consumer (a `rebalance-log` entry) starts at the group's committed offset, which
the consumer fetched after the poll that received the assignment was invoked; so its first read of
the key must be at or above every commit of that key acknowledged before that poll began. A first
read below one is `reread-committed`: the group handed out an offset below an acknowledged commit.

The most direct evidence is a consumer asking the coordinator for the group's committed offsets of
its own keys at the start of a poll (`fetched-commits`): the answer must be at least every commit of
that key acknowledged before the poll began. One below is `lost-commit`: the coordinator acknowledged
a commit and then no longer had it. It catches a lost commit at the owner's next poll, before the
owner overwrites it, where `reread-committed` needs a rebalance to come first.

`chaos check` runs all three for every run whose consumers subscribe (`commit_anomalies`), next to
the Spark checks, as one linear Python pass over the history. All are bad anomalies; none exists in
Jepsen's checker, which does not record commits.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kernel.history import Op, OpType, commits, fetched_commits, pairs, reads


@dataclass(frozen=True, slots=True)
class Commit:
    key: int
    offset: int
    invoked: int  # index of the poll's invoke
    completed: int  # index of its completion
    process: Any


@dataclass(frozen=True, slots=True)
class Regression:
    """`later` began after `earlier` was acknowledged, and committed a lower offset of the same key."""

    earlier: Commit
    later: Commit

    def to_json(self) -> dict[str, Any]:
        return {"key": self.later.key, "committed": self.earlier.offset, "then": self.later.offset,
                "committed-at": self.earlier.completed, "then-invoked-at": self.later.invoked,
                "processes": [self.earlier.process, self.later.process]}


def acknowledged_commits(ops: Iterable[Op]) -> list[Commit]:
    out = []
    for inv, done in pairs(ops):
        if done is None:
            continue
        for k, o in sorted(commits(done).items()):
            out.append(Commit(k, o, inv.index, done.index, done.process))
    return out


def commit_regressions(ops: Iterable[Op]) -> list[Regression]:
    """Every acknowledged commit below the highest commit of its key acknowledged before it began."""
    by_key: dict[int, list[Commit]] = {}
    for c in acknowledged_commits(ops):
        by_key.setdefault(c.key, []).append(c)
    found = []
    for cs in by_key.values():
        done = sorted(cs, key=lambda c: c.completed)
        ends = [c.completed for c in done]
        best: list[Commit] = []  # best[i]: the highest commit among done[: i + 1]
        for c in done:
            best.append(c if not best or c.offset > best[-1].offset else best[-1])
        for c in cs:
            i = bisect.bisect_left(ends, c.invoked)  # done[:i] completed before c was invoked
            if i and best[i - 1].offset > c.offset:
                found.append(Regression(best[i - 1], c))
    return sorted(found, key=lambda r: r.later.invoked)


@dataclass(frozen=True, slots=True)
class BelowCommit:
    """`process` saw `key` at `offset` in the op completed at `index` — as its first read of a newly
    assigned key (`seen` "first-read") or as the group's committed offset it fetched ("fetched") —
    below `committed`, a commit acknowledged (at `committed_at`) before that op was invoked."""

    key: int
    process: Any
    index: int
    offset: int
    committed: int
    committed_at: int
    seen: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "process": self.process, "index": self.index, self.seen: self.offset,
                "committed": self.committed, "committed-at": self.committed_at}


def committed_rereads(ops: Iterable[Op]) -> list[BelowCommit]:
    """Every newly assigned key whose first read is below a commit acknowledged before the poll
    that received the assignment was invoked."""
    waiting: dict[Any, dict[int, tuple[int, int]]] = {}  # process -> key -> the commit its first read must reach
    found = []
    for op, before in _with_commits_before(ops):
        mine = waiting.setdefault(op.process, {})
        if op.f == "subscribe" or op.type is not OpType.OK:
            mine.clear()  # a new consumer (or an unknown state): its keys come in its rebalance logs
        for entry in op.extra.get("rebalance-log", []) if op.type is OpType.OK else []:
            for k in entry.get("revoked", []):
                mine.pop(int(k), None)
            for k in entry.get("assigned", []):
                if int(k) in before:
                    mine[int(k)] = before[int(k)]
        firsts: dict[int, int] = {}
        for r in reads(op):
            firsts.setdefault(r.key, r.offset)
        for k, first in sorted(firsts.items()):
            need = mine.pop(k, None)
            if need is not None and first < need[0]:
                found.append(BelowCommit(k, op.process, op.index, first, need[0], need[1], "first-read"))
    return found


def _with_commits_before(ops: Iterable[Op]) -> Iterator[tuple[Op, dict[int, tuple[int, int]]]]:
    """Each client completion, with the highest commit of every key acknowledged before its op was
    invoked: key -> (offset, index of the completion that acknowledged it). A completion's own
    commits count for the ops invoked after it."""
    high: dict[int, tuple[int, int]] = {}
    at_invoke: dict[Any, dict[int, tuple[int, int]]] = {}  # process -> `high` when its op was invoked
    for op in ops:
        if not op.is_client:
            continue
        if op.type is OpType.INVOKE:
            at_invoke[op.process] = dict(high)
            continue
        yield op, at_invoke.pop(op.process, {})
        for k, o in commits(op).items():
            if k not in high or o > high[k][0]:
                high[k] = (o, op.index)


def lost_commits(ops: Iterable[Op]) -> list[BelowCommit]:
    """Every fetched committed offset below a commit of its key acknowledged before the fetching op
    was invoked."""
    found = []
    for op, before in _with_commits_before(ops):
        for k, got in sorted(fetched_commits(op).items()):
            need = before.get(k)
            if need is not None and got < need[0]:
                found.append(BelowCommit(k, op.process, op.index, got, need[0], need[1], "fetched"))
    return found


def _findings(ops: list[Op]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each commit anomaly's name with its rows (as JSON), in report order."""
    return [("commit-regression", [r.to_json() for r in commit_regressions(ops)]),
            ("reread-committed", [x.to_json() for x in committed_rereads(ops)]),
            ("lost-commit", [x.to_json() for x in lost_commits(ops)])]


def commit_anomalies(ops: Iterable[Op], examples: int) -> dict[str, dict[str, Any]]:
    """The commit anomalies in results.json's shape ({type: {count, examples}}), absent when none."""
    return {name: {"count": len(rows), "examples": rows[:examples]}
            for name, rows in _findings(list(ops)) if rows}


def main(argv: list[str] | None = None) -> int:
    """`python -m results.commits RUN_DIR|history.jsonl`: print commit regressions, rereads of
    committed offsets and lost commits as JSON Lines; exit 0 when there are none, 1 when there are."""
    import argparse
    import json
    from pathlib import Path

    from kernel.history import read_ops

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("run", type=Path)
    args = ap.parse_args(argv)
    path = args.run / "history.jsonl" if args.run.is_dir() else args.run
    ops = list(read_ops(path))
    findings = _findings(ops)
    for name, rows in findings:
        for row in rows:
            print(json.dumps({"type": name, **row}))
    found, rereads, lost = (len(rows) for _, rows in findings)
    print(f"{len(acknowledged_commits(ops))} acknowledged commits, {found} regressions, "
          f"{rereads} rereads of committed offsets, {lost} fetched below an acknowledged commit")
    return 1 if found or rereads or lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
