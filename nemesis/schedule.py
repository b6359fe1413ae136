"""The combined schedule (Jepsen's `nemesis.combined`), planned up front from the seed.

Every `interval` seconds (jittered ±25 %) a fault starts, drawn from the requested families and
kinds, and lasts between half and one interval — or longer, when a composition needs it (a zombie's
pause must outlast the ZooKeeper session); with `max_active` 1 the next one waits until the previous
has ended and a quiet interval passed, with `max_active` k up to k faults overlap. Each
fault's targets are planned here against the real cluster shape (`PlanWorld`) and saved exactly
as planned. The plan is a pure function of its arguments and draws only from
`rng(seed, "nemesis", "plan")`, so two runs with one seed have the same faults in the same order.
"""

from __future__ import annotations

from kernel.nemesis import PlannedFault, PlanWorld
from kernel.rng import rng as seeded
from nemesis.registry import FAMILIES, expand


def plan(seed: int, names: list[str], *, interval_s: float, time_limit_s: float, world: PlanWorld,
         max_active: int = 1) -> list[PlannedFault]:
    choices = expand(names)
    if not choices or interval_s <= 0:
        return []
    rng = seeded(seed, "nemesis", "plan")
    faults: list[PlannedFault] = []
    t = interval_s
    while t < time_limit_s:
        family, kind = choices[rng.randrange(len(choices))]
        duration = min(interval_s * rng.uniform(0.5, 1.0), max(time_limit_s - t, 0.1))
        p = FAMILIES[family]().plan(kind, rng, world)
        duration = max(duration, p.min_duration_s)
        faults.append(PlannedFault(len(faults), family, kind, round(t, 3), round(duration, 3), p.targets, p.params))
        gap = interval_s * rng.uniform(0.75, 1.25)
        active = [f.at_s + f.duration_s for f in faults if f.at_s + f.duration_s > t]
        t = (min(active) if len(active) >= max_active else t) + gap
    return faults
