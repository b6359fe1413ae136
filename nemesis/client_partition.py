"""Partitions between the clients and a broker (iptables inside the broker's node).

Kinds: `one` (a seeded broker node stops hearing the clients: every packet from the control host to
the broker's ports is dropped, so requests time out and answers never come back) and `leader` (the
same, for the node leading a seeded key, resolved when the fault starts). As with any drop, TCP
retransmits what it can, so a request whose client still waits when the cut lifts may yet be
served; one whose client gave up (its timeout, a new connection) is lost. `delayed-produce` is the
same cut, held on purpose past the producers' timeout.

This is the network fault a broker without peers can take (one broker over its own store, Tansu's
SQLite topology), so it needs the `client-net` capability rather than `net` (cut off from its peers).
It is named explicitly (`--nemesis client-partition`), not part of `all`: the seeded default
schedule of every earlier run stays what it was.
"""

from __future__ import annotations

import random
from typing import Any

from kernel import layout
from kernel.capabilities import Cut, Net
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, victim
from kernel.system import Need


class ClientCuts:
    """What every fault between the clients and one broker does, whatever it holds or drops: cut
    the victim's node off from the clients (`cut`) when it starts, lift exactly that cut when it
    stops, lift every cut when healed. `delayed-produce` is the same with its requests held."""

    def cut(self, ctx: NemesisContext, node: str) -> Cut:
        """The broker's ports only: the control host is where the clients run and also where the
        harness's SSH comes from, and a cut of every port would cut the harness off its own node."""
        return Cut({node: [layout.CLIENTS]}, ports=ctx.system.ports("broker"))

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        hit = ctx.resolve(fault.targets["victim"])
        cut = self.cut(ctx, hit.node.name)
        ctx.net().drop(cut)
        return {"kind": fault.kind, "node": hit.node.name, **cut.to_json(), "targets": {"victim": hit.to_json()}}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        ctx.net().lift(Cut.from_json(started))
        return {"kind": fault.kind, "node": started["node"], "healed": True}

    def heal(self, ctx: NemesisContext) -> None:
        ctx.net().heal_net()


class ClientPartitionFamily(ClientCuts):
    name: str = "client-partition"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "one": "cut a seeded broker's node off from the clients (requests and answers dropped)",
        "leader": "cut a key's leader off from the clients",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-client-partition", "stop-client-partition", "client partition", "#8E44AD")
    composite: bool = False
    needs: tuple[type, ...] = (Net,)
    requires_all: tuple[Need, ...] = (Need("broker", "client-net"),)
    requires: dict[str, tuple[Need, ...]] = {}

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        return Plan({"victim": victim("leader" if kind == "leader" else "node", rng, world)})
