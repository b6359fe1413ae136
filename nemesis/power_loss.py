"""Power loss (KIP-101 scenario 2): every broker, or a majority, dies at once and comes back in some order.

Kinds: `all` (every broker), `majority` (a seeded majority). The brokers restart when the fault ends,
one by one, in a seeded order with seeded delays (0-3 s), so the first to return may lead with
whatever its log holds and the others truncate against it. Each victim's files lose what its
broker wrote and did not fsync (the `Disk` capability: a FUSE file system that forgets unsynced
writes in containers, the disk model in the simulator), so what it tests is durability, recovery
and truncation order across a cluster-wide restart.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Disk, Killable
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need


class PowerLossFamily:
    name: str = "power-loss"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "all": "every broker dies at once, losing unfsynced writes, and returns one by one in a seeded order",
        "majority": "a seeded majority dies at once, losing unfsynced writes, and returns one by one",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-power-loss", "stop-power-loss", "power loss", "#7B241C")
    composite: bool = False
    needs: tuple[type, ...] = (Disk, Killable)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "kill"), Need("broker", "lose-unfsynced"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        n = len(world.nodes) if kind == "all" else len(world.nodes) // 2 + 1
        victims = sorted(rng.sample(world.nodes, n))
        order = rng.sample(victims, len(victims))
        delays = [round(rng.uniform(0.0, 3.0), 2) for _ in order]
        return Plan({v: Target.of_node(v) for v in victims}, {"order": order, "delays_s": delays})

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        disk = ctx.disk()
        nodes = sorted(ctx.resolve(t).node.name for t in fault.targets.values())
        lost = {name: disk.crash(ctx.node(name), lose_unfsynced=True) for name in nodes}
        return {"kind": fault.kind, "nodes": nodes, "lost": {n: v for n, v in lost.items() if v}}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        killer = ctx.killable()
        order, delays = list(fault.params["order"]), list(fault.params["delays_s"])
        for name, delay in zip(order, delays, strict=True):
            killer.start(ctx.node(name))
            if delay:
                await ctx.sleep(delay)
        return {"kind": fault.kind, "restarted": order, "delays_s": delays}

    def heal(self, ctx: NemesisContext) -> None:
        killer = ctx.killable()
        for n in ctx.nodes:
            killer.start(n)
