"""Moves: operator requests that change where replicas live and who leads, made while faults go on.

Not faults themselves, but the moments replication is most fragile: a reassignment (seed 003 F —
a new replica copies the log, joins the ISR, leadership may move, the old replicas are deleted)
and a preferred leader election. Jepsen's Redpanda tests move partitions for the same reason.

Kinds: `reassign` moves one partition (its key planned from the seed) to as many nodes as it has
replicas, taken in a seeded order; `elect` asks for a preferred election of every partition.
Requests go through the DB's `Reassignable` capability (for logbroker: the ZooKeeper admin paths,
because a Kafka client would hang on a paused broker). The controller finishes them on its own —
across faults and controller failovers — so `stop` only records where the partition stands, and
`heal` has nothing to undo: a half-done move is a state the cluster must cope with, not damage.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import Admin, ClusterView
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld
from kernel.system import Need


class MoveFamily:
    name: str = "move"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "reassign": "move one partition's replicas to a seeded set of nodes",
        "elect": "ask for a preferred leader election of every partition",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-move", "stop-move", "move", "#A0E9B4")
    composite: bool = False
    needs: tuple[type, ...] = (Admin, ClusterView)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "net"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        order = rng.sample(world.nodes, len(world.nodes))
        return Plan({}, {"key": rng.randrange(world.partitions), "order": order,
                         "replicas": min(world.replication_factor, len(world.nodes))})

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        from kazoo.exceptions import KazooException

        db = ctx.reassignable()
        p = int(fault.params["key"])
        try:
            if fault.kind == "elect":
                parts = list(range(ctx.partitions))
                accepted = db.request_preferred_election(ctx.topic, parts)
                return {"kind": "elect", "partitions": parts, "accepted": accepted}
            current = db.assignment(ctx.topic, p)
            rf = len(current["replicas"]) - len(current["adding"]) if current else int(fault.params["replicas"])
            names = list(fault.params["order"])[:rf]
            db.request_reassignment(ctx.topic, p, [ctx.node(n) for n in names])
            return {"kind": "reassign", "partition": p, "nodes": names,
                    "from": current["replicas"] if current else None}
        except (KazooException, OSError) as e:  # ZooKeeper out of reach: recorded, the run goes on
            return {"kind": fault.kind, "partition": p, "error": f"{type(e).__name__}: {e}"}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        from kazoo.exceptions import KazooException

        p = int(fault.params["key"])
        state = ctx.view().partition(ctx.topic, p)
        try:
            assignment = ctx.reassignable().assignment(ctx.topic, p)
        except (KazooException, OSError):  # ZooKeeper out of reach: where it stands is unknown
            assignment = None
        return {"kind": fault.kind, "partition": p, "assignment": assignment,
                "leader": state.leader.name if state and state.leader else None,
                "isr": [n.name for n in state.isr] if state else None}

    def heal(self, ctx: NemesisContext) -> None:
        return None
