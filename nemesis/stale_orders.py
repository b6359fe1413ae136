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

from kernel.capabilities import ClusterView, Killable, Net
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need
from nemesis.steps import Steps, cut, heal_all, key_led_elsewhere, leader_other_than, wait_for, zk_cut


class StaleOrdersFamily:
    name: str = "stale-orders"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "controller": "hold a controller's requests to one broker in the network until a newer controller took over",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-stale-orders", "stop-stale-orders", "stale orders", "#5D6D7E")
    composite: bool = True
    needs: tuple[type, ...] = (Net, Killable, ClusterView)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("controller", "net"), Need("broker", "kill"), Need("metadata-store", "net"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        key = rng.randrange(world.partitions)
        return Plan({"restarted": Target.leader(key, rng.choice(world.nodes))},
                    {"key": key, "session_timeout_s": world.session_timeout_s,
                     "settle_s": round(rng.uniform(2.0, 5.0), 2)},
                    min_duration_s=5 * world.session_timeout_s + 15)

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        view, steps, done = ctx.view(), Steps(ctx, fault), out.setdefault("steps", {})
        timeout = 4 * float(fault.params["session_timeout_s"])
        out["key"] = int(fault.params["key"])
        ctrl = view.controller()
        if ctrl is None or len(ctx.nodes) < 3:
            out["skipped"] = "no controller" if ctrl is None else "fewer than three nodes"
            return out
        # A must lead something: killing it is what makes the controller issue the leader changes
        # whose late copies are the stale orders. (A node that leads nothing drew only harmless
        # UpdateMetadata to B, and the composition missed the planted bug.)
        key, state = await key_led_elsewhere(ctx, out["key"], ctrl, out)
        if state is None or state.leader is None:
            return out
        a = state.leader
        b = next(n for n in ctx.nodes if n.name not in (ctrl.name, a.name))
        out.update(controller=ctrl.name, restarted=a.name, receiver=b.name)
        c = cut(ctx, ctrl, b)
        done["cut"] = (steps.start("start-partition", c), c)
        steps.kill(done, "down", [a])  # a heal before the restart below restarts it and closes the step
        moved = await wait_for(ctx, lambda: leader_other_than(ctx, key, {a.name}), timeout)
        out["reelected"] = moved.name if moved else None
        steps.restart(done, "down")
        iso = zk_cut(ctx, ctrl)
        done["isolate"] = (steps.start("start-partition", iso), iso)
        new = await wait_for(ctx, lambda: (lambda n: n if n is not None and n.name != ctrl.name else None)(
            view.controller()), timeout)
        out["new_controller"] = new.name if new else None
        await ctx.sleep(float(fault.params["settle_s"]))  # the new controller's orders go out, writes go on
        steps.lift(done, ("cut",))
        return out

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        steps, done = Steps(ctx, fault), started.get("steps", {})
        steps.lift(done, ("cut", "isolate"))
        steps.restart(done, "down")  # healed while the killed leader was still down
        return {k: v for k, v in started.items() if k != "steps"}

    def heal(self, ctx: NemesisContext) -> None:
        heal_all(ctx)
