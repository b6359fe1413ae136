"""Moves: operator requests that change where replicas live and who leads, made while faults go on.

Not faults themselves, but the moments replication is most fragile: a reassignment (seed 003 F —
a new replica copies the log, joins the ISR, leadership may move, the old replicas are deleted)
and a preferred leader election. Jepsen's Redpanda tests move partitions for the same reason.

Kinds: `reassign` moves one partition (its key from the seed) to as many nodes as it has replicas,
taken in a seeded order; `elect` asks for a preferred election of every partition.
Requests go through the ZooKeeper admin paths (cluster-impl/README.md), not a Kafka client, which
would hang on a paused broker. The controller finishes them on its own — across faults and
controller failovers — so `stop` only records where the partition stands, and `heal` has nothing
to undo: a half-done move is a state the cluster must cope with, not damage.
"""

from __future__ import annotations

import random
from typing import Any

from harness.db.logbroker import broker_id
from nemesis.model import NemesisContext, PlannedFault


class MoveFamily:
    name = "move"
    kinds = ("reassign", "elect")

    def plan_params(self, kind: str, rng: random.Random, node_names: list[str]) -> dict[str, Any]:
        return {"key": rng.randrange(8), "order": rng.sample(node_names, len(node_names))}

    def _partition(self, ctx: NemesisContext, fault: PlannedFault) -> int:
        return int(fault.params.get("key", 0)) % max(ctx.partitions, 1)

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        from kazoo.exceptions import KazooException

        p = self._partition(ctx, fault)
        try:
            if fault.kind == "elect":
                parts = list(range(ctx.partitions))
                accepted = ctx.db.request_preferred_election(ctx.topic, parts)
                return {"kind": "elect", "partitions": parts, "accepted": accepted}
            current = ctx.db.assignment(ctx.topic, p)
            rf = len(current["replicas"]) - len(current["adding"]) if current else ctx.db.settings.replication_factor
            names = list(fault.params["order"])[:rf]
            ids = [broker_id(ctx.nodes, ctx.node(n)) for n in names]
            ctx.db.request_reassignment(ctx.topic, p, ids)
            return {"kind": "reassign", "partition": p, "nodes": names, "replicas": ids,
                    "from": current["replicas"] if current else None}
        except (KazooException, OSError) as e:  # ZooKeeper out of reach: recorded, the run goes on
            return {"kind": fault.kind, "partition": p, "error": f"{type(e).__name__}: {e}"}

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        p = self._partition(ctx, fault)
        state = ctx.db.partition_state(ctx.topic, p) or {}
        return {"kind": fault.kind, "partition": p, "assignment": ctx.db.assignment(ctx.topic, p),
                "leader": state.get("leader"), "isr": state.get("isr")}

    def heal(self, ctx: NemesisContext) -> None:
        return None
