"""Network partitions with iptables inside the nodes (kernel-level packet drops).

Kinds: `halves` (random majority/minority), `one` (isolate a node), `one-way` (a node hears nothing
but is still heard), `bridge` (two halves joined by one node), `controller` and `leader` (isolate
the active controller / a key's leader, resolved when the fault starts), `zookeeper` (cut one
node's broker and ZooKeeper off from the ZooKeeper ports of the others, while brokers still see
each other). The history records the grudge (node -> nodes it drops).
"""

from __future__ import annotations

import random
from typing import Any

from harness import layout
from nemesis import grudge
from nemesis.model import NemesisContext, PlannedFault

ZK_PORTS = (layout.ZK_CLIENT_PORT, layout.ZK_PEER_PORT, layout.ZK_ELECTION_PORT)


class PartitionFamily:
    name = "partition"
    kinds = ("halves", "one", "one-way", "bridge", "controller", "leader", "zookeeper")

    def plan_params(self, kind: str, rng: random.Random, node_names: list[str]) -> dict[str, Any]:
        order = list(node_names)
        rng.shuffle(order)
        params: dict[str, Any] = {"order": order, "node": order[0]}
        if kind == "leader":
            params["key"] = rng.randrange(8)
        return params

    def _grudge(self, ctx: NemesisContext, fault: PlannedFault) -> tuple[grudge.Grudge, tuple[int, ...], str | None]:
        names = [n.name for n in ctx.nodes]
        p = fault.params
        kind = fault.kind
        if kind == "halves":
            return grudge.halves(list(p["order"])), (), None
        if kind == "bridge":
            return grudge.bridge(list(p["order"])), (), None
        if kind in ("one", "one-way", "zookeeper", "controller", "leader"):
            target = p["node"]
            if kind == "controller":
                target = ctx.resolve({"role": "controller", "node": p["node"]}).name
            elif kind == "leader":
                target = ctx.resolve({"role": "leader", "key": p.get("key", 0) % max(ctx.partitions, 1),
                                      "node": p["node"]}).name
            if kind == "one-way":
                return grudge.one_way(target, names), (), target
            ports = ZK_PORTS if kind == "zookeeper" else ()
            return grudge.isolate(target, names), ports, target
        raise ValueError(f"unknown partition kind {kind!r}")

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        g, ports, target = self._grudge(ctx, fault)
        ips = {n.name: n.ip for n in ctx.nodes}
        for node, drops in g.items():
            if drops:
                ctx.remotes[node].exec(grudge.drop_commands([ips[d] for d in drops], ports), timeout=30)
        out: dict[str, Any] = {"kind": fault.kind, "grudge": grudge.describe(g)}
        if ports:
            out["ports"] = list(ports)
        if target:
            out["target"] = target
        return out

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        self.heal(ctx)
        return {"kind": fault.kind, "healed": sorted(n.name for n in ctx.nodes)}

    def heal(self, ctx: NemesisContext) -> None:
        for n in ctx.nodes:
            ctx.remotes[n.name].exec(grudge.heal_command(), timeout=30, check=False)
