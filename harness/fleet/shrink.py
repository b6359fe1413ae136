"""Shrinking a found seed with its candidate schedules fanned out as tasks, with the result the
sequential shrinker (`harness.sim_search.shrink`) reaches.

The sequential shrinker is greedy: it tries one candidate, keeps it when it still fails, and builds
the next candidate from whatever it kept. Its next few candidates can be written down in advance
under one assumption each, and tried at once:

- fewer faults: with the schedule fixed, dropping fault i, i+1, ..., i+w-1 are independent; the
  first of them that still fails is the one the sequential shrinker would keep (every earlier one
  passed against the same schedule), and the later ones are thrown away;
- shorter, later (per fault): the sequential shrinker walks a chain (halve, halve again, ...) and
  stops at the first candidate that passes; the chain's next w links are tried at once, and the
  longest prefix that still fails is kept.

So the shrunk schedule and the step count are the sequential shrinker's; only the wall time
differs (a window of w candidates costs about one simulation on w cores, some of it speculative).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from kernel.nemesis import PlannedFault
from kernel.spec import RunSpec

#: judges many candidate schedules of one seed at once: whether each still fails
FailsMany = Callable[[RunSpec, list[list[PlannedFault]]], list[bool]]


def _prefix(results: list[bool]) -> int:
    """How many leading candidates still fail."""
    n = 0
    while n < len(results) and results[n]:
        n += 1
    return n


def _chain(best: list[PlannedFault], i: int, width: int,
           step: Callable[[PlannedFault], PlannedFault | None]) -> list[list[PlannedFault]]:
    """Up to `width` successive candidates for fault i, each one step on from the previous."""
    cands: list[list[PlannedFault]] = []
    cur = best[i]
    while len(cands) < width:
        nxt = step(cur)
        if nxt is None:
            break
        cands.append(best[:i] + [nxt] + best[i + 1:])
        cur = nxt
    return cands


def shrink_fanout(spec: RunSpec, faults: list[PlannedFault], deadline: float, say: Callable[[str], None],
                  fails_many: FailsMany, width: int) -> tuple[list[PlannedFault], int]:
    """The smallest schedule found that still fails: fewer faults, then shorter, then later."""
    best, steps = list(faults), 0
    width = max(1, width)
    i = 0
    while i < len(best) and time.monotonic() < deadline:  # fewer
        window = range(i, min(len(best), i + width))
        cands = [best[:j] + best[j + 1:] for j in window]
        res = fails_many(spec, cands)
        hit = next((k for k, r in enumerate(res) if r), None)
        if hit is None:
            steps += len(cands)
            i += len(cands)
            continue
        steps += hit + 1
        removed = best[i + hit]
        best = cands[hit]
        i += hit
        say(f"shrink: fault {removed.id} ({removed.family}-{removed.kind}) is not needed; {len(best)} left")

    def shorter(f: PlannedFault) -> PlannedFault | None:
        return replace(f, duration_s=round(f.duration_s / 2, 3)) if f.duration_s > 0.5 else None

    def later(f: PlannedFault) -> PlannedFault | None:
        at = round(f.at_s + max(1.0, f.duration_s), 3)
        return None if at + f.duration_s > spec.time_limit else replace(f, at_s=at)

    for step in (shorter, later):
        for i in range(len(best)):
            while time.monotonic() < deadline:
                cands = _chain(best, i, width, step)
                if not cands:
                    break
                n = _prefix(fails_many(spec, cands))
                steps += min(n + 1, len(cands))
                if n:
                    best = cands[n - 1]
                if n < len(cands):
                    break
    return best, steps
