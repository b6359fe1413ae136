"""Kills: SIGKILL brokers and start them again when the fault ends.

Kinds: `one`, `leader`, `controller` (resolved when the fault starts), `all` (every broker at once).
A SIGKILL does not drop the page cache, so un-fsynced writes survive it; losing them needs a disk
that forgets unsynced data — the simulation backend's job, not the containers'.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Killable
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target, victim
from kernel.system import Need


class KillFamily:
    name: str = "kill"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "one": "SIGKILL a seeded broker, start it again when the fault ends",
        "leader": "kill a key's leader",
        "controller": "kill the active controller",
        "all": "kill every broker at once",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-kill", "stop-kill", "kill", "#E9C3A0")
    composite: bool = False
    needs: tuple[type, ...] = (Killable,)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "kill"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "controller": (Need("controller", "kill"),),
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        one = victim(kind, rng, world)
        return Plan({n: Target.of_node(n) for n in world.nodes} if kind == "all" else {"victim": one})

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        db = ctx.killable()
        hits = {role: ctx.resolve(t) for role, t in fault.targets.items()}
        value: dict[str, Any] = {"kind": fault.kind, "nodes": sorted({h.node.name for h in hits.values()}),
                                 "targets": {role: h.to_json() for role, h in hits.items()}}
        for name in value["nodes"]:
            db.kill(ctx.node(name))
        return value

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        db = ctx.killable()
        for name in started["nodes"]:
            db.start(ctx.node(name))
        return {"kind": fault.kind, "restarted": started["nodes"]}

    def heal(self, ctx: NemesisContext) -> None:
        db = ctx.killable()
        for n in ctx.nodes:
            db.start(n)
