"""GC-like pauses: SIGSTOP a process, SIGCONT it later (the process shows state T meanwhile).

Kinds: `one`, `leader`, `controller` pause a broker; `zookeeper` pauses a node's ZooKeeper server.
A pause longer than zookeeper.session.timeout.ms expires the broker's session (the zombie of seed
003's discussion); a shorter one does not — the schedule draws durations on both sides.
"""

from __future__ import annotations

import random
from typing import Any

from nemesis.model import NemesisContext, PlannedFault


class PauseFamily:
    name = "pause"
    kinds = ("one", "leader", "controller", "zookeeper")

    def __init__(self) -> None:
        self.paused: set[tuple[str, str]] = set()

    def plan_params(self, kind: str, rng: random.Random, node_names: list[str]) -> dict[str, Any]:
        return {"node": rng.choice(node_names), "key": rng.randrange(8)}

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        role = {"leader": "leader", "controller": "controller"}.get(fault.kind, "node")
        node = ctx.resolve({"role": role, "node": fault.params["node"],
                            "key": int(fault.params.get("key", 0)) % max(ctx.partitions, 1)})
        process = "zookeeper" if fault.kind == "zookeeper" else "broker"
        ctx.db.pause(node, process=process)
        self.paused.add((node.name, process))
        return {"kind": fault.kind, "node": node.name, "process": process}

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        ctx.db.resume(ctx.node(started["node"]), process=started["process"])
        self.paused.discard((started["node"], started["process"]))
        return {"kind": fault.kind, "node": started["node"], "process": started["process"]}

    def heal(self, ctx: NemesisContext) -> None:
        for n in ctx.nodes:  # resume everything, not only what we remember: heal must be total
            for process in ("broker", "zookeeper"):
                ctx.db.resume(n, process=process)
        self.paused.clear()
