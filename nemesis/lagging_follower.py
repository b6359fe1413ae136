"""Lagging follower, then the leader dies (seed 002; KIP-497): who may be elected?

1. On a key k whose leader L is not the controller C, the next in line F (the first follower in
   assignment order, the one the controller would elect) is cut off from L's broker port — its
   fetches are dropped, its ZooKeeper session stays alive, so it stays registered — and L's requests
   to C are dropped too, so no ISR change L asks for can reach the controller; this lasts longer
   than the replica lag time;
2. then L dies (kind `kill-leader`) or is frozen past its session (`pause-leader`).
A correct leader counts F out of the ISR only once the controller has agreed (AlterIsr, KIP-497),
which it cannot here, so it acknowledges nothing F lacks, and the controller may elect F safely.
With `local-isr-shrink` the leader shrinks alone and acknowledges writes F never had, while the
controller — which never heard of the shrink — still lists F and elects it: acknowledged writes
are lost. The planned key is a preference: if its leader is the controller (whose AlterIsr never
crosses the network), the first key after it with another leader is used; if every leader is the
controller (common after failovers), a preferred leader election is asked for first. Both are
recorded in the fault's value.

Kind `kill-isr` asks the opposite question (seed 003 (A), unclean election): L's requests to C are
NOT dropped, so the controller does take F out of the ISR (F is a follower other than C where there
is one, so that the cut leaves C's requests to L alone); then every ISR member except F dies at
once. F is the only live replica and lacks acknowledged writes: a correct controller leaves the
partition offline until an ISR member returns; one that elects a replica outside the ISR (unclean
election when it is not enabled) loses what F never fetched. Only one fetch round trip separates F's
return from its catching up, so the window is kept open by killing the ISR while F is still cut off;
the dead stay down past their ZooKeeper sessions (one back within its session is a bounce, not a loss).
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import ClusterView, Killable, Net, Pausable
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need
from nemesis.steps import Steps, cut, heal_all, isr_without, key_led_elsewhere, wait_for


class LaggingFollowerFamily:
    name: str = "lagging-follower"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "kill-leader": "cut the next in line off from its leader past the lag time, then kill the leader (KIP-497)",
        "pause-leader": "as kill-leader, but the leader is frozen past its session instead",
        "kill-isr": "the controller drops a lagging follower from the ISR, then every ISR member dies (unclean)",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-lagging-follower", "stop-lagging-follower", "lagging follower", "#1ABC9C")
    composite: bool = True
    needs: tuple[type, ...] = (Net, Killable, Pausable, ClusterView)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "kill"), Need("broker", "net"), Need("broker", "pause"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "kill-leader": (Need("broker", "kill"), Need("broker", "net"), Need("controller", "net"),),
        "pause-leader": (Need("broker", "pause"), Need("broker", "net"), Need("controller", "net"),),
        "kill-isr": (Need("broker", "kill"), Need("broker", "net"), Need("controller", "net"),),
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        key = rng.randrange(world.partitions)
        lag = world.replica_lag_s * rng.uniform(1.3, 1.8)
        return Plan({"leader": Target.leader(key, rng.choice(world.nodes))},
                    {"key": key, "lag_s": round(lag, 2)},
                    min_duration_s=lag + (world.session_timeout_s * 2 if kind != "kill-leader" else 5))

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        view, steps, done = ctx.view(), Steps(ctx, fault), out.setdefault("steps", {})
        planned = int(fault.params["key"])
        ctrl = view.controller()
        out.update(planned_key=planned, controller=ctrl.name if ctrl else None)
        key, state = await key_led_elsewhere(ctx, planned, ctrl, out)
        if state is None or state.leader is None:
            return out
        leader = state.leader
        followers = [n for n in state.replicas if n.name != leader.name]
        if not followers:
            out["skipped"] = "the partition has no follower"
            return out
        if fault.kind == "kill-isr" and ctrl is not None:
            # Any follower asks this kind's question; the controller is the wrong one. Cut off from
            # L's broker port, it could not tell L anything either: not the LeaderAndIsr that makes L
            # leader (in flight right after a preferred election), so L never shrank the ISR and the
            # controller kept F in it (a CI failure of tests/nemesis/test_compositions.py).
            followers.sort(key=lambda n: n.name == ctrl.name)
        f = followers[0]
        out.update(leader=leader.name, follower=f.name)
        c = cut(ctx, f, leader)
        done["cut"] = (steps.start("start-partition", c), c)
        if ctrl is not None and fault.kind != "kill-isr":
            c2 = cut(ctx, leader, ctrl)
            done["cut-controller"] = (steps.start("start-partition", c2), c2)
        await ctx.sleep(float(fault.params["lag_s"]))
        out["isr_before_failover"] = [n.name for n in state.isr]
        if fault.kind == "kill-isr":
            # The leader checks its followers' lag only now and then (every half replica lag time in
            # Kafka), and the shrink then crosses AlterIsr and ZooKeeper: on a loaded machine it can
            # land after lag_s. Killing before it would ask a different question (F still in the ISR),
            # so wait for it, at most another lag_s, and record whether it came.
            shrunk = await wait_for(ctx, lambda: isr_without(view.partition(ctx.topic, key), f.name),
                                    float(fault.params["lag_s"]))
            now = shrunk or view.partition(ctx.topic, key)
            out["follower_out_of_isr"] = shrunk is not None
            isr = now.isr if now is not None else state.isr
            out["isr_when_killed"] = [n.name for n in isr]
            steps.kill(done, "down", [leader] + [n for n in isr if n.name not in (leader.name, f.name)], "isr")
            return out
        if fault.kind == "kill-leader":
            steps.kill(done, "down", [leader])
        else:
            steps.pause(done, "down", leader)
        after = view.partition(ctx.topic, key)
        out["isr_when_leader_went"] = [n.name for n in after.isr] if after else None
        return out

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        steps, done = Steps(ctx, fault), started.get("steps", {})
        steps.lift(done, ("cut", "cut-controller"))
        if fault.kind == "pause-leader":
            steps.resume(done, "down")
        steps.restart(done, "down", "isr" if fault.kind == "kill-isr" else "one")
        return {k: v for k, v in started.items() if k != "steps"}

    def heal(self, ctx: NemesisContext) -> None:
        heal_all(ctx, resume=True)

