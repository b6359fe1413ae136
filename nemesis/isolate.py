"""Isolation of one broker from one side only.

Kinds:
- `zookeeper`: the broker cannot reach any ZooKeeper server (its own node's included), while its
  peers and clients still reach it: its session expires, the cluster replaces it, and it keeps
  serving with a stale view until it notices (a zombie made by the network, not by a pause);
- `peers`: the broker and the other brokers cannot reach each other's broker port, while its
  ZooKeeper session stays alive, so it stays registered: a leader whose followers cannot fetch, a
  follower that falls behind but is never declared dead.
The victim is a key's leader, the controller, or a node, chosen from the seed.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Cut, Net
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need


class IsolateFamily:
    name: str = "isolate"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "zookeeper": "cut one broker from ZooKeeper only, while its peers and clients still reach it",
        "peers": "cut one broker from the other brokers only, while its ZooKeeper session stays alive",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-isolate", "stop-isolate", "isolation", "#F5B041")
    composite: bool = False
    needs: tuple[type, ...] = (Net,)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "net"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "zookeeper": (Need("broker", "net"), Need("metadata-store", "net"),),
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        fallback = rng.choice(world.nodes)
        victim = rng.choice([Target.leader(rng.randrange(world.partitions), fallback), Target.controller(fallback),
                             Target.of_node(fallback)])
        return Plan({"victim": victim}, {}, min_duration_s=world.session_timeout_s * 1.5 if kind == "zookeeper" else 0)

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        hit = ctx.resolve(fault.targets["victim"])
        v = hit.node.name
        others = [n.name for n in ctx.nodes if n.name != v]
        if fault.kind == "zookeeper":
            # every ZooKeeper server (the victim's own too: local traffic passes INPUT) drops the victim
            g: dict[str, list[str]] = {n.name: [v] for n in ctx.nodes}
            ports: tuple[int, ...] = (ctx.system.port("metadata-store"),)
        else:
            g = {v: others, **{o: [v] for o in others}}
            ports = (ctx.system.port("broker"),)
        cut = Cut(g, ports)
        ctx.net().drop(cut)
        return {"kind": fault.kind, "node": v, **cut.to_json(), "targets": {"victim": hit.to_json()}}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        ctx.net().lift(Cut.from_json(started))
        return {"kind": fault.kind, "node": started["node"], "healed": True}

    def heal(self, ctx: NemesisContext) -> None:
        ctx.net().heal_net()
