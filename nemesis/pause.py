"""GC-like pauses: SIGSTOP a process, SIGCONT it when the fault ends.

Kinds: `one` (a broker), `leader`, `controller` (resolved when the fault starts), `zookeeper` (the
ZooKeeper server on a node). A pause longer than the ZooKeeper session timeout expires the broker's
session (the zombie of seed 003's discussion); a shorter one does not — the schedule draws
durations on both sides.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Pausable
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, victim
from kernel.system import Need


class PauseFamily:
    name: str = "pause"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "one": "SIGSTOP a seeded broker, SIGCONT it when the fault ends",
        "leader": "pause a key's leader",
        "controller": "pause the active controller",
        "zookeeper": "pause the ZooKeeper server on a node",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-pause", "stop-pause", "pause", "#C5A0E9")
    composite: bool = False
    needs: tuple[type, ...] = (Pausable,)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "pause"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "controller": (Need("controller", "pause"),),
        "zookeeper": (Need("metadata-store", "pause"),),
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        return Plan({"victim": victim(kind, rng, world)})

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        hit = ctx.resolve(fault.targets["victim"])
        process = ctx.process_name("metadata-store" if fault.kind == "zookeeper" else "broker")
        ctx.pausable().pause(hit.node, process=process)
        return {"kind": fault.kind, "node": hit.node.name, "process": process, "targets": {"victim": hit.to_json()}}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        ctx.pausable().resume(ctx.node(started["node"]), process=started["process"])
        return {"kind": fault.kind, "node": started["node"], "process": started["process"]}

    def heal(self, ctx: NemesisContext) -> None:
        db = ctx.pausable()
        for n in ctx.nodes:  # resume everything, not only what we remember: heal must be total
            for process in ctx.system.pausable():
                db.resume(n, process=process)
