"""Crashes that lose what was not fsynced (Jepsen's lazyfs): one broker dies, and its files keep only
what it fsynced — as after a power cut of that one machine, whose page cache is gone with it.

Kinds: `one` (a seeded node), `leader` (a key's leader), `controller` (resolved when the fault
starts). The broker starts again, with whatever its disk kept, when the fault ends. Through the
`Disk` capability: in containers a FUSE file system under the broker's data directory that drops
unsynced writes (the node image's lazyfs), in the simulator its disk model (which may also tear the
last batch). With `flush.messages=1` (both backends' setting) every record an ISR member held was
fsynced, so a correct cluster loses nothing acknowledged; a broker that acknowledged, or counted a
follower's fetch, before its fsync would.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Disk, Killable
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, victim
from kernel.system import Need


class LoseUnfsyncedFamily:
    name: str = "lose-unfsynced"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "one": "crash a seeded broker and lose what it did not fsync",
        "leader": "crash a key's leader and lose what it did not fsync",
        "controller": "crash the controller and lose what it did not fsync",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-lose-unfsynced", "stop-lose-unfsynced", "crash, unsynced lost", "#6E2C00")
    composite: bool = False
    needs: tuple[type, ...] = (Disk, Killable)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "kill"), Need("broker", "lose-unfsynced"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "controller": (Need("controller", "kill"), Need("controller", "lose-unfsynced"),),
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        return Plan({"victim": victim(kind, rng, world)})

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        hit = ctx.resolve(fault.targets["victim"])
        lost = ctx.disk().crash(hit.node, lose_unfsynced=True)
        return {"kind": fault.kind, "nodes": [hit.node.name], "targets": {"victim": hit.to_json()}, "lost": lost}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        for name in started["nodes"]:
            ctx.killable().start(ctx.node(name))
        return {"kind": fault.kind, "restarted": started["nodes"]}

    def heal(self, ctx: NemesisContext) -> None:
        killer = ctx.killable()
        for n in ctx.nodes:
            killer.start(n)
