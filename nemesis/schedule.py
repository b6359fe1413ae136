"""The combined schedule (Jepsen's `nemesis.combined`), planned up front from the seed.

Every `interval` seconds (jittered ±25 %) one fault starts, drawn from the requested families and
kinds; it lasts between half and one interval; then the cluster gets a quiet interval. With
`max_active` > 1 the next fault may start before the previous one ended. The plan is a pure
function of its arguments, so two runs with one seed have the same faults in the same order.
"""

from __future__ import annotations

import random

from nemesis.model import PlannedFault
from nemesis.registry import FAMILIES, expand


def plan(seed: int, names: list[str], *, interval_s: float, time_limit_s: float, node_names: list[str],
         max_active: int = 1) -> list[PlannedFault]:
    choices = expand(names)
    if not choices:
        return []
    rng = random.Random(f"nemesis/{seed}")
    faults: list[PlannedFault] = []
    t = interval_s
    ends: list[float] = []
    while t < time_limit_s:
        family, kind = choices[rng.randrange(len(choices))]
        duration = min(interval_s * rng.uniform(0.5, 1.0), max(time_limit_s - t, 0.1))
        params = FAMILIES[family]().plan_params(kind, rng, list(node_names))
        faults.append(PlannedFault(family, kind, round(t, 3), round(duration, 3), params))
        ends.append(t + duration)
        active = [e for e in ends if e > t]
        gap = interval_s * rng.uniform(0.75, 1.25)
        t = t + duration + gap if len(active) >= max_active else t + gap
    return faults
