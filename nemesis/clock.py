"""Clock skew: a node's wall clock steps away from the true time, through the `Clock` capability
(libfaketime's offset file in containers, the node's clock model in the simulator).

`bump` steps the wall clock of some nodes by ± seconds (Jepsen uses ~10 ms to ~5 min), as an NTP
step would; `strobe` flips it back and forth while the fault lasts; `reset` puts every node back
to +0 (as a scheduled event of its own, Jepsen's clock-reset); stopping any of them resets its own
nodes to +0. The monotonic clock is left alone, and the host's clock never moves.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from kernel.capabilities import Clock
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.runtime import Activity
from kernel.system import Need


class ClockFamily:
    name: str = "clock"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "bump": "step some nodes' wall clocks by seeded seconds, as an NTP step would",
        "strobe": "flip some nodes' wall clocks back and forth while the fault lasts",
        "reset": "put every node's wall clock back to the true time",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-clock", "stop-clock", "clock skew", "#A0C8E9")
    composite: bool = False
    needs: tuple[type, ...] = (Clock,)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "clock"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
    }

    def __init__(self) -> None:
        self._strobes: dict[int, Activity] = {}

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        k = rng.randint(1, max(1, len(world.nodes) // 2))
        targets = sorted(rng.sample(world.nodes, k))
        magnitude = 10 ** rng.uniform(-2, 2.5)  # 10 ms .. ~5 min, log-uniform like Jepsen's bumps
        seconds = round(magnitude * rng.choice((-1, 1)), 3)
        return Plan({n: Target.of_node(n) for n in targets},
                    {"seconds": seconds, "period_s": round(rng.uniform(0.05, 1.0), 3)})

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        if fault.kind == "reset":
            self._reset_all(ctx)
            return {"kind": "reset", "nodes": sorted(n.name for n in ctx.nodes), "seconds": 0.0}
        nodes = sorted(ctx.resolve(t).node.name for t in fault.targets.values())
        seconds = float(fault.params["seconds"])
        self._set(ctx, nodes, seconds)
        if fault.kind == "strobe":
            self._strobes[fault.id] = ctx.spawn(f"clock-strobe-{fault.id}",
                                                self._strobe(ctx, nodes, seconds, float(fault.params["period_s"])))
        return {"kind": fault.kind, "nodes": nodes, "seconds": seconds}

    async def _strobe(self, ctx: NemesisContext, nodes: list[str], seconds: float, period: float) -> None:
        """Flip the offset on and off every `period` until cancelled."""
        on = False
        while True:
            await asyncio.sleep(period)
            self._set(ctx, nodes, seconds if on else 0.0)
            on = not on

    @staticmethod
    def _set(ctx: NemesisContext, nodes: list[str], seconds: float) -> None:
        clock = ctx.clock()
        for n in nodes:
            clock.set_clock(ctx.node(n), seconds)

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        self._stop_strobe(ctx, fault.id)
        self._set(ctx, started["nodes"], 0.0)
        return {"kind": "reset", "nodes": started["nodes"]}

    def _stop_strobe(self, ctx: NemesisContext, fid: int) -> None:
        strobe = self._strobes.pop(fid, None)
        if strobe is not None:
            ctx.halt(strobe)  # gone before the offset is reset: a last flip must not land after it

    def _reset_all(self, ctx: NemesisContext) -> None:
        for fid in list(self._strobes):
            self._stop_strobe(ctx, fid)
        self._set(ctx, [n.name for n in ctx.nodes], 0.0)

    def heal(self, ctx: NemesisContext) -> None:
        self._reset_all(ctx)
