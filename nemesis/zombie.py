"""Zombies (seed 003, discussion section 3): a leader or the controller frozen past its session.

Kinds: `leader` (a key's leader) and `controller`. The process is paused (SIGSTOP) for longer than
the ZooKeeper session timeout, so the cluster declares it dead and replaces it (a new leader with a
higher leader epoch, a new controller with a higher controller epoch); then it is resumed
(SIGCONT) with its stale view, while clients with stale metadata and peers still talk to it, and
whatever it had queued goes out. Correct brokers refuse every request that carries an old epoch;
`stale-epoch-accepted` obeys them.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Pausable
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, victim
from kernel.system import Need


class ZombieFamily:
    name: str = "zombie"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "leader": "freeze a key's leader past its ZooKeeper session, then resume it with its stale view",
        "controller": "freeze the controller past its session, then resume it with its stale view",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-zombie", "stop-zombie", "zombie", "#8E44AD")
    composite: bool = False
    needs: tuple[type, ...] = (Pausable,)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "pause"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "controller": (Need("controller", "pause"),),
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        target = victim(kind, rng, world)
        # past the session (and the controller's failover after it), with a seeded margin
        return Plan({"victim": target}, {}, min_duration_s=world.session_timeout_s * rng.uniform(1.6, 2.5))

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        hit = ctx.resolve(fault.targets["victim"])
        ctx.pausable().pause(hit.node, process=ctx.process_name("broker"))
        return {"kind": fault.kind, "node": hit.node.name, "targets": {"victim": hit.to_json()}}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        ctx.pausable().resume(ctx.node(started["node"]), process=ctx.process_name("broker"))
        return {"kind": fault.kind, "node": started["node"], "resumed": True}

    def heal(self, ctx: NemesisContext) -> None:
        db = ctx.pausable()
        for n in ctx.nodes:
            db.resume(n, process=ctx.process_name("broker"))
