"""Committed offsets never go backwards: a check over a subscribe-mode history's acknowledged commits.

The run's consumer group commits, after each poll, the next offset of every key the poll read
(`kernel.history.commits`). A consumer that takes a key over starts where the group committed, so
once a commit of offset `o` for key `k` is acknowledged, any commit of `k` that begins later must be
at least `o`. A commit below that means the group's committed offset went backwards: a coordinator
that lost an acknowledged commit (a failover to a replica that did not have it), served an offset
that was never committed, or a consumer that restarted below it because its data was lost. Order is
real time, judged by the poll ops that carry the commits: commit X precedes commit Y when X's op
completed before Y's op was invoked; commits of concurrent ops are not ordered.

A part (workloads/): it reads the history only through `kernel.history`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kernel.history import Op, commits, pairs


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


def main(argv: list[str] | None = None) -> int:
    """`python -m workloads.commits RUN_DIR|history.jsonl`: print the regressions as JSON Lines;
    exit 0 when there are none, 1 when there are."""
    import argparse
    import json
    from pathlib import Path

    from kernel.history import read_ops

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("run", type=Path)
    args = ap.parse_args(argv)
    path = args.run / "history.jsonl" if args.run.is_dir() else args.run
    ops = list(read_ops(path))
    found = commit_regressions(ops)
    for r in found:
        print(json.dumps(r.to_json()))
    print(f"{len(acknowledged_commits(ops))} acknowledged commits, {len(found)} regressions")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
