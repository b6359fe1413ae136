"""`chaos sim-search --guide coverage`: spend the search's budget around the seeds that reached
dangerous states (coverage probes, `cluster-impl/logbroker/probes.py`) no earlier seed reached.

AFL's idea on fault schedules: a seed whose run hit a probe never hit before joins the *corpus*
(its seed and its fault schedule). Each round, half the candidates are fresh seeds (the plain
search), the rest mutants of corpus entries — the same seed, so the workload and the simulator's
choices stay what they were, with its schedule changed a little: a fault moved, stretched or
shortened, dropped, or repeated later. A mutant that reaches something new joins the corpus in
turn. Every choice is drawn from a generator seeded by the search's first seed and the round, so a
search replays (kernel/rng.py's rule).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

Schedule = list[dict[str, Any]]  # PlannedFault.to_json() of each fault


@dataclass
class Candidate:
    seed: int
    faults: Schedule | None  # None: the seed's own schedule


@dataclass
class CoverageGuide:
    first_seed: int
    time_limit: float
    covered: dict[str, int] = field(default_factory=dict)  # probe -> the seed that first hit it
    corpus: list[tuple[int, Schedule]] = field(default_factory=list)
    next_seed: int = -1
    rounds: int = 0
    mutants: int = 0

    def __post_init__(self) -> None:
        self.next_seed = self.first_seed

    def candidates(self, n: int) -> list[Candidate]:
        """The next round: fresh seeds, and (once the corpus has entries) as many mutants of them."""
        rng = random.Random(f"coverage-guide/{self.first_seed}/{self.rounds}")
        self.rounds += 1
        n_mut = n // 2 if self.corpus else 0
        out = []
        for _ in range(n - n_mut):
            out.append(Candidate(self.next_seed, None))
            self.next_seed += 1
        for _ in range(n_mut):
            seed, faults = self.corpus[min(int(rng.expovariate(1.0) * len(self.corpus) / 3), len(self.corpus) - 1)
                                       if rng.random() < 0.5 else rng.randrange(len(self.corpus))]
            out.append(Candidate(seed, mutate(faults, rng, self.time_limit)))
            self.mutants += 1
        return out

    def observe(self, seed: int, faults: Schedule, hit: dict[str, int]) -> list[str]:
        """A candidate's run hit `hit`: the probes new to the search (the run joins the corpus if any).
        The newest entries go first, so the search dwells where it last found something."""
        new = sorted(p for p in hit if p not in self.covered)
        for p in new:
            self.covered[p] = seed
        if new:
            self.corpus.insert(0, (seed, copy.deepcopy(faults)))
        return new


def mutate(faults: Schedule, rng: random.Random, time_limit: float) -> Schedule:
    """One to three small changes to a schedule (a copy)."""
    out = copy.deepcopy(faults)
    for _ in range(rng.randint(1, 3)):
        if not out:
            break
        i = rng.randrange(len(out))
        op = rng.choice(("shift", "stretch", "drop", "repeat"))
        f = out[i]
        if op == "shift":
            f["at_s"] = round(min(max(1.0, float(f["at_s"]) + rng.uniform(-4.0, 4.0)), time_limit - 1.0), 3)
        elif op == "stretch":
            f["duration_s"] = round(max(0.05, float(f["duration_s"]) * rng.choice((0.5, 0.75, 1.5, 2.0))), 3)
        elif op == "drop" and len(out) > 1:
            out.pop(i)
        elif op == "repeat":
            twin = copy.deepcopy(f)
            twin["id"] = max(int(g["id"]) for g in out) + 1
            twin["at_s"] = round(rng.uniform(1.0, max(1.0, time_limit - float(f["duration_s"]) - 1.0)), 3)
            out.append(twin)
    out.sort(key=lambda g: (float(g["at_s"]), int(g["id"])))
    return out
