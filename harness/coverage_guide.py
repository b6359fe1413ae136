"""`chaos sim-search --guide coverage`: spend the search's budget around the seeds that reached
dangerous states (coverage probes, `cluster-impl/logbroker/probes.py`) no earlier seed reached.

AFL's idea on fault schedules: a seed whose run hit a probe never hit before joins the *corpus*
(its seed and its fault schedule). Each round, some candidates are fresh seeds (the plain search),
the rest mutants of corpus entries — the same seed, so the workload and the simulator's
choices stay what they were, with its schedule changed a little: a fault moved, stretched or
shortened, dropped, or repeated later, or a fault of another corpus entry spliced in (a dangerous
state often needs two faults at once, such as a lagging follower and then its leader's death, and
two entries may each have found one half). A mutant that reaches something new joins the corpus in
turn.

How many mutants: as many as they earn, a two-armed bandit. Each arm's yield is the share of its last
`YIELD_WINDOW` candidates that reached a probe new to the search (with one in two as the prior), and the
mutants' share is their yield over both, kept within `MUTANT_SHARE`. Early on fresh seeds find
something almost every time and get most of the round (a fixed half would reach every probe a fresh
seed finds at half the plain search's pace); once fresh seeds stop finding anything the mutants,
which search around the rare states, get up to four in five.

Which entry to mutate: half the time one of the newest (the search dwells where it last found
something), half the time by *rarity*, as AFL's and libFuzzer's power schedules do: an entry's weight
is the sum, over the probes its run hit, of one over how many runs so far hit that probe. An entry
that alone reached a state most runs never reach is mutated far more often than one whose probes
every run hits, because its neighbours are where the next rare state is likeliest.

Every choice is drawn from a generator seeded by the search's first seed and the round, so a search
replays (kernel/rng.py's rule).
"""

from __future__ import annotations

import copy
import random
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

Schedule = list[dict[str, Any]]  # PlannedFault.to_json() of each fault


@dataclass
class Candidate:
    seed: int
    faults: Schedule | None  # None: the seed's own schedule


@dataclass(frozen=True)
class Entry:
    """A corpus entry: a run that reached a probe no earlier run reached."""

    seed: int
    faults: Schedule
    probes: frozenset[str]  # every probe the run hit, not only the new ones: its rarity weight


#: share of the mutants that first splice in one fault of another corpus entry
SPLICE_SHARE = 0.25
#: bounds of the mutants' share of a round, so neither arm starves
MUTANT_SHARE = (0.2, 0.8)
#: how many of each arm's latest candidates its yield is measured over
YIELD_WINDOW = 30


@dataclass
class CoverageGuide:
    first_seed: int
    time_limit: float
    covered: dict[str, int] = field(default_factory=dict)  # probe -> the seed that first hit it
    corpus: list[Entry] = field(default_factory=list)  # newest first
    hits: Counter[str] = field(default_factory=Counter)  # probe -> how many runs hit it
    next_seed: int = -1
    rounds: int = 0
    mutants: int = 0
    #: per arm ("fresh", "mutant"): whether each of its latest candidates reached a new probe (1) or not
    found: dict[str, deque[int]] = field(
        default_factory=lambda: {arm: deque(maxlen=YIELD_WINDOW) for arm in ("fresh", "mutant")})

    def __post_init__(self) -> None:
        self.next_seed = self.first_seed

    def share(self) -> float:
        """The mutants' share of the next round (0 until the corpus has an entry)."""
        if not self.corpus:
            return 0.0
        fresh, mutant = (self._yield(arm) for arm in ("fresh", "mutant"))
        return min(max(mutant / (fresh + mutant), MUTANT_SHARE[0]), MUTANT_SHARE[1])

    def _yield(self, arm: str) -> float:
        window = self.found[arm]
        return (sum(window) + 1) / (len(window) + 2)

    def candidates(self, n: int) -> list[Candidate]:
        """The next round: fresh seeds first, then (once the corpus has entries) mutants of them, each
        candidate a mutant with the probability `share()`."""
        rng = random.Random(f"coverage-guide/{self.first_seed}/{self.rounds}")
        self.rounds += 1
        share = self.share()
        n_mut = sum(1 for _ in range(n) if rng.random() < share)
        out = []
        for _ in range(n - n_mut):
            out.append(Candidate(self.next_seed, None))
            self.next_seed += 1
        for _ in range(n_mut):
            entry = self._pick(rng)
            faults = entry.faults
            if len(self.corpus) > 1 and rng.random() < SPLICE_SHARE:
                other = rng.choice([e for e in self.corpus if e is not entry])
                faults = splice(faults, other.faults, rng)
            out.append(Candidate(entry.seed, mutate(faults, rng, self.time_limit)))
            self.mutants += 1
        return out

    def _pick(self, rng: random.Random) -> Entry:
        if rng.random() < 0.5:  # one of the newest
            return self.corpus[min(int(rng.expovariate(1.0) * len(self.corpus) / 3), len(self.corpus) - 1)]
        return rng.choices(self.corpus, weights=[self.rarity(e) for e in self.corpus])[0]

    def rarity(self, entry: Entry) -> float:
        """The sum over the entry's probes of 1 / runs that hit the probe (a probe hit once counts 1)."""
        return sum(1.0 / max(1, self.hits[p]) for p in entry.probes) or 1e-9

    def observe(self, seed: int, faults: Schedule, hit: dict[str, int], *, mutant: bool = False) -> list[str]:
        """A candidate's run hit `hit`: the probes new to the search (the run joins the corpus if any).
        The newest entries go first, so the search dwells where it last found something. `mutant`:
        the candidate was a mutant, not a fresh seed (its arm's yield is credited)."""
        self.hits.update(hit.keys())
        new = sorted(p for p in hit if p not in self.covered)
        self.found["mutant" if mutant else "fresh"].append(1 if new else 0)
        for p in new:
            self.covered[p] = seed
        if new:
            self.corpus.insert(0, Entry(seed, copy.deepcopy(faults), frozenset(hit)))
        return new


def splice(faults: Schedule, donor: Schedule, rng: random.Random) -> Schedule:
    """`faults` with one fault of `donor` added at the donor's time (a copy, ids kept unique). Both
    schedules were planned for the same cluster (nodes, partitions), so the donor's targets resolve
    in the receiving run too."""
    if not donor:
        return copy.deepcopy(faults)
    out = copy.deepcopy(faults)
    twin = copy.deepcopy(rng.choice(donor))
    twin["id"] = max((int(g["id"]) for g in out), default=0) + 1
    out.append(twin)
    out.sort(key=lambda g: (float(g["at_s"]), int(g["id"])))
    return out


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
