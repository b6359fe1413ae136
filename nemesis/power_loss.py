"""Power loss (KIP-101 scenario 2): every broker, or a majority, dies at once and comes back in some order.

Kinds: `all` (every broker), `majority` (a seeded majority). The brokers restart when the fault ends,
one by one, in a seeded order with seeded delays (0-3 s), so the first to return may lead with
whatever its log holds and the others truncate against it. A SIGKILL keeps the page cache, so this
loses no un-fsynced data (the simulation backend can); what it tests is recovery and truncation
order across a cluster-wide restart.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target


class PowerLossFamily:
    name: str = "power-loss"
    kinds: tuple[str, ...] = ("all", "majority")
    perf: FaultPerf = FaultPerf("start-power-loss", "stop-power-loss", "power loss", "#7B241C")
    composite: bool = False

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        n = len(world.nodes) if kind == "all" else len(world.nodes) // 2 + 1
        victims = sorted(rng.sample(world.nodes, n))
        order = rng.sample(victims, len(victims))
        delays = [round(rng.uniform(0.0, 3.0), 2) for _ in order]
        return Plan({v: Target.of_node(v) for v in victims}, {"order": order, "delays_s": delays})

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        killer = ctx.killable()
        nodes = sorted(ctx.resolve(t).node.name for t in fault.targets.values())
        for name in nodes:
            killer.kill(ctx.node(name))
        return {"kind": fault.kind, "nodes": nodes}

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        killer = ctx.killable()
        order, delays = list(fault.params["order"]), list(fault.params["delays_s"])
        for name, delay in zip(order, delays, strict=True):
            killer.start(ctx.node(name))
            if delay:
                ctx.sleep(delay)
        return {"kind": fault.kind, "restarted": order, "delays_s": delays}

    def heal(self, ctx: NemesisContext) -> None:
        killer = ctx.killable()
        for n in ctx.nodes:
            killer.start(n)
