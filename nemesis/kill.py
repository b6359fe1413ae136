"""Kills: SIGKILL brokers and start them again when the fault ends.

Kinds: `one`, `leader`, `controller` (the broker /controller names), `all` (every broker at once).
A SIGKILL does not drop the page cache, so un-fsynced writes survive it; losing them would need a
filesystem that forgets unsynced data (LazyFS) — not done here, and said so in the README.
"""

from __future__ import annotations

import random
from typing import Any

from nemesis.model import NemesisContext, PlannedFault


class KillFamily:
    name = "kill"
    kinds = ("one", "leader", "controller", "all")

    def plan_params(self, kind: str, rng: random.Random, node_names: list[str]) -> dict[str, Any]:
        return {"node": rng.choice(node_names), "key": rng.randrange(8)}

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        if fault.kind == "all":
            victims = list(ctx.nodes)
        else:
            role = {"leader": "leader", "controller": "controller"}.get(fault.kind, "node")
            victims = [ctx.resolve({"role": role, "node": fault.params["node"],
                                    "key": int(fault.params.get("key", 0)) % max(ctx.partitions, 1)})]
        out: dict[str, Any] = {"kind": fault.kind, "nodes": [v.name for v in victims]}
        if fault.kind == "controller":
            out["controller_epoch"] = ctx.db.controller_epoch()
        for v in victims:
            ctx.db.kill(v)
        return out

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        for name in started["nodes"]:
            ctx.db.start(ctx.node(name))
        return {"kind": fault.kind, "restarted": started["nodes"]}

    def heal(self, ctx: NemesisContext) -> None:
        for n in ctx.nodes:
            ctx.db.start(n)
