"""Network partitions with iptables inside the nodes (kernel-level packet drops).

Kinds: `halves` (random majority/minority), `one` (isolate a node), `one-way` (a node hears nothing
but is still heard), `bridge` (two halves joined by one node), `controller` and `leader` (isolate
the active controller / a key's leader, resolved when the fault starts), `zookeeper` (cut one
node's broker and ZooKeeper off from the ZooKeeper ports of the others: the ports of the system's
`metadata-store` processes, while brokers still see
each other), `flaky` (a node loses a seeded share, 20-60 %, of what it receives: iptables'
`statistic` match, since this kernel has no netem — timeouts and retries rather than a clean cut).
The history records the grudge (node -> nodes it drops) and the resolved target.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Cut, Net
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need
from nemesis import grudge


class PartitionFamily:
    name: str = "partition"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "halves": "cut the cluster into a random majority and minority",
        "one": "isolate one seeded node from every other",
        "one-way": "a node hears nothing from the others but is still heard",
        "bridge": "two halves joined by one node that sees both",
        "controller": "isolate the active controller",
        "leader": "isolate a key's leader",
        "zookeeper": "cut a node's broker and ZooKeeper from the other ZooKeeper servers; brokers still see each other",
        "flaky": "a node loses a seeded 20-60 % of the packets it receives",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-partition", "stop-partition", "partition", "#E9A4A0")
    composite: bool = False
    needs: tuple[type, ...] = (Net,)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "net"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "controller": (Need("controller", "net"),),
        "zookeeper": (Need("metadata-store", "net"),),
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        order = list(world.nodes)
        rng.shuffle(order)
        if kind in ("halves", "bridge"):
            return Plan({}, {"order": order})
        if kind == "controller":
            return Plan({"victim": Target.controller(order[0])})
        if kind == "leader":
            return Plan({"victim": Target.leader(rng.randrange(world.partitions), order[0])})
        if kind == "flaky":
            return Plan({"victim": Target.of_node(order[0])}, {"loss": round(rng.uniform(0.2, 0.6), 2)})
        return Plan({"victim": Target.of_node(order[0])})

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        names = [n.name for n in ctx.nodes]
        value: dict[str, Any] = {"kind": fault.kind}
        ports: tuple[int, ...] = ()
        if fault.kind == "halves":
            g = grudge.halves(list(fault.params["order"]))
        elif fault.kind == "bridge":
            g = grudge.bridge(list(fault.params["order"]))
        else:
            hit = ctx.resolve(fault.targets["victim"])
            value["targets"] = {"victim": hit.to_json()}
            if fault.kind == "one-way":
                g = grudge.one_way(hit.node.name, names)
            else:
                ports = ctx.system.ports("metadata-store") if fault.kind == "zookeeper" else ()
                g = grudge.isolate(hit.node.name, names)
        cut = Cut(g, ports, loss=float(fault.params["loss"]) if fault.kind == "flaky" else None)
        ctx.net().drop(cut)
        return {**value, **cut.to_json()}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        ctx.net().lift(Cut.from_json(started))
        return {"kind": fault.kind, "healed": sorted(started["grudge"])}

    def heal(self, ctx: NemesisContext) -> None:
        ctx.net().heal_net()
