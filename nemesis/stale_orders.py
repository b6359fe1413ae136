"""Stale orders (seed 003, discussion section 3): a controller's orders arrive after it was replaced.

A zombie controller is dangerous only through what it says after a newer controller took over, so
this composition makes sure it says something, and that it arrives late:

1. the controller C's requests to a broker B are dropped (B's ZooKeeper session and everything else
   are untouched) — TCP keeps retransmitting them;
2. another broker A (the leader of a key, the first from the planned one that C does not lead) is
   killed and, once C has re-elected its partitions' leaders (orders to B now wait in the
   network), restarted;
3. C is cut off from ZooKeeper: its session expires and a new controller, with a higher controller
   epoch, re-elects C's partitions with higher leader epochs — while C still believes it leads;
4. the drop on C -> B is lifted: C's old orders reach B after the new controller's.
Correct brokers refuse a request with an older controller or leader epoch; `stale-epoch-accepted`
obeys it, and B goes back to leaders and epochs the cluster has left behind. `stop` reconnects C
to ZooKeeper and makes sure A runs.
"""

from __future__ import annotations

import random
from typing import Any

from kernel import layout
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.node import Node
from nemesis import grudge
from nemesis.partition import apply, lift
from nemesis.steps import Steps, cut, heal_all, key_led_elsewhere, uncut, wait_for


class StaleOrdersFamily:
    name: str = "stale-orders"
    kinds: tuple[str, ...] = ("controller",)
    perf: FaultPerf = FaultPerf("start-stale-orders", "stop-stale-orders", "stale orders", "#5D6D7E")
    composite: bool = True

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        key = rng.randrange(world.partitions)
        return Plan({"restarted": Target.leader(key, rng.choice(world.nodes))},
                    {"key": key, "session_timeout_s": world.session_timeout_s,
                     "settle_s": round(rng.uniform(2.0, 5.0), 2)},
                    min_duration_s=5 * world.session_timeout_s + 15)

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        view, killer = ctx.view(), ctx.killable()
        steps = Steps(ctx, fault)
        key = int(fault.params["key"])
        timeout = 4 * float(fault.params["session_timeout_s"])
        out: dict[str, Any] = {"kind": fault.kind, "key": key, "steps": {}}
        ctrl = view.controller()
        if ctrl is None or len(ctx.nodes) < 3:
            return {**out, "skipped": "no controller" if ctrl is None else "fewer than three nodes"}
        # A must lead something: killing it is what makes the controller issue the leader changes
        # whose late copies are the stale orders. (A node that leads nothing drew only harmless
        # UpdateMetadata to B, and the composition missed the planted bug.)
        key, state = key_led_elsewhere(ctx, key, ctrl, out)
        out["key"] = key
        if state is None or state.leader is None:
            return {**out, "skipped": "no partition has a leader other than the controller"}
        a = state.leader
        b = next(n for n in ctx.nodes if n.name not in (ctrl.name, a.name))
        out.update(controller=ctrl.name, restarted=a.name, receiver=b.name)
        c = cut(ctx, ctrl, b)
        out["steps"]["cut"] = (steps.start("start-partition", c), c)
        killer.kill(a)
        sid = steps.start("start-kill", {"kind": "one", "nodes": [a.name]})
        moved = wait_for(ctx, lambda: _elected_without(view, ctx.topic, key, a), timeout)
        out["reelected"] = moved.name if moved else None
        killer.start(a)
        steps.stop(sid, "stop-kill", {"kind": "one", "restarted": [a.name]})
        zk = {n.name: [ctrl.name] for n in ctx.nodes}
        apply(ctx, zk, (layout.ZK_CLIENT_PORT,))
        iso = {"kind": "zookeeper", "grudge": grudge.describe(zk), "ports": [layout.ZK_CLIENT_PORT]}
        out["steps"]["isolate"] = (steps.start("start-partition", iso), iso)
        new = wait_for(ctx, lambda: (lambda n: n if n is not None and n.name != ctrl.name else None)(
            view.controller()), timeout)
        out["new_controller"] = new.name if new else None
        ctx.sleep(float(fault.params["settle_s"]))  # the new controller's orders go out, writes go on
        sid, c = out["steps"].pop("cut")
        uncut(ctx, c)
        steps.stop(sid, "stop-partition", {"kind": "cut", "healed": sorted(c["grudge"])})
        return out

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        steps = Steps(ctx, fault)
        done = started.get("steps", {})
        if "cut" in done:
            sid, c = done["cut"]
            uncut(ctx, c)
            steps.stop(sid, "stop-partition", {"kind": "cut", "healed": sorted(c["grudge"])})
        if "isolate" in done:
            sid, iso = done["isolate"]
            lift(ctx, iso["grudge"], iso["ports"])
            steps.stop(sid, "stop-partition", {"kind": "zookeeper", "healed": sorted(iso["grudge"])})
        if started.get("restarted"):
            ctx.killable().start(ctx.node(started["restarted"]))
        return {k: v for k, v in started.items() if k != "steps"}

    def heal(self, ctx: NemesisContext) -> None:
        heal_all(ctx)


def _elected_without(view: Any, topic: str, key: int, gone: Node) -> Node | None:
    n: Node | None = view.leader(topic, key)
    return n if n is not None and n.name != gone.name else None
