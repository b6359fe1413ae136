"""Held markers (TXN-CONTRACT item 1; Kafka's WriteTxnMarkers waits like acks=all): markers reach a
leader while its next leader cannot fetch them, and the leader dies.

A transaction coordinator forgets a decided transaction once every partition leader has answered
its marker. A leader may answer only once the marker is replicated to its ISR, or a leader change
can lose a marker the coordinator will never send again, and the partition keeps the transaction
open for ever (its last stable offset stops: read_committed readers see nothing after it). A leader
that acknowledges a marker once written loses it only if it dies within the one fetch round before
its followers have it; random kills rarely land there. This composition builds the window:

0. on key k, leader L with in-sync followers N (next in line: first in assignment order) and R (the
   survivor; preferably not the controller);
1. R is cut off from L's broker port, its requests held, not lost (`partition` step of kind `cut`,
   held) until L has dropped R from k's ISR (past the replica lag time). The markers R's transaction
   coordinators send L wait in the cut, one per transaction they decided, while producing to L goes on
   with R out of the ISR;
2. N stops hearing L's broker answers (a `mute`: its fetches still arrive, so it stays in the ISR for
   the lag time, but it fetches nothing new, so L's high watermark stays where N is), then R's cut
   lifts: the held markers reach L, which appends them. A correct L answers none of them (the HW
   cannot pass N); R fetches again and rejoins the ISR;
3. L is killed while N still lacks the markers (a `kill` step); the controller elects N, the first
   live ISR member in assignment order, and R truncates to N's log.
`stop` lifts the mute (and the cut, if the run stopped in step 1) and restarts L.
With correct markers the coordinator, having no answer, sends them again to N and every transaction
ends. With `marker-ack-before-replication` L answered them, the coordinator wrote CompleteCommit and
forgot them: N holds the transactions open for ever (`hanging-transaction`; the committed records
never read are `unseen`). Only transactions coordinated on R and writing a partition L leads are
held, so a fault may hold none: its value says what each step saw.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import ClusterView, Killable, Net
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need
from nemesis.steps import (
    Steps,
    cut,
    heal_all,
    isr_with,
    isr_without,
    leader_other_than,
    mute,
    planned_roles,
    wait_for,
)

#: How long step 2 waits at most for R to fetch again before L is killed: the lift delivers R's
#: held requests at TCP's next retransmission, a few seconds after a long cut. Step 2 must end well
#: within the replica lag time (10 s) counted from the mute, or L drops N from the ISR and elects R,
#: which has the markers, and the question is not asked.
REJOIN_WAIT_FRACTION = 0.5


class HeldMarkersFamily:
    name: str = "held-markers"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "kill": "hold a survivor's markers to a leader, release them while the next leader is muted, "
                "then kill the leader (TXN-CONTRACT item 1)",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-held-markers", "stop-held-markers", "held markers", "#8E44AD")
    composite: bool = True
    needs: tuple[type, ...] = (Net, Killable, ClusterView)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "kill"), Need("broker", "net"), Need("coordinator", "net"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        key = rng.randrange(world.partitions)
        return Plan({"leader": Target.leader(key, rng.choice(world.nodes))},
                    {"key": key, "settle_s": round(rng.uniform(0.3, 1.2), 2),
                     "replica_lag_s": world.replica_lag_s, "session_timeout_s": world.session_timeout_s},
                    min_duration_s=2 * world.replica_lag_s + 3 * world.session_timeout_s + 5)

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        view, steps, done = ctx.view(), Steps(ctx, fault), out.setdefault("steps", {})
        roles = planned_roles(ctx, fault, out)
        if roles is None:
            return out
        key, leader, nxt, survivor = roles
        out.update(key=key, leader=leader.name, next_leader=nxt.name, survivor=survivor.name)
        lag = float(fault.params.get("replica_lag_s", 10.0))
        c = cut(ctx, survivor, leader, hold=True)
        done["cut"] = (steps.start("start-partition", c), c)
        # The leader checks its followers' lag every half lag time, then asks the controller: wait
        # for the shrink itself, at most two lag times, and record whether it came.
        shrunk = await wait_for(ctx, lambda: isr_without(view.partition(ctx.topic, key), survivor.name), 2 * lag)
        out["survivor_out_of_isr"] = shrunk is not None
        if shrunk is None or all(n.name != nxt.name for n in shrunk.isr):
            out["skipped"] = "the survivor stayed in the ISR, or the next leader left it"
            return out
        m = mute(ctx, nxt, leader)
        done["mute"] = (steps.start("start-partition", m), m)
        await ctx.sleep(0.2)  # a fetch answer already on its way to N arrives; the next does not
        steps.lift(done, ("cut",))
        back = await wait_for(ctx, lambda: isr_with(view.partition(ctx.topic, key), survivor.name),
                              REJOIN_WAIT_FRACTION * lag)
        out["survivor_back_in_isr"] = back is not None
        await ctx.sleep(float(fault.params["settle_s"]))  # the held markers are appended (and answered?)
        now = view.partition(ctx.topic, key)
        out["isr_when_killed"] = [n.name for n in now.isr] if now else None
        steps.kill(done, "kill-leader", [leader])
        timeout = 4 * max(1.0, float(fault.params.get("session_timeout_s", 6.0)))
        elected = await wait_for(ctx, lambda: leader_other_than(ctx, key, {leader.name}), timeout)
        out["elected"] = elected.name if elected else None
        return out

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        steps, done = Steps(ctx, fault), started.get("steps", {})
        steps.lift(done, ("cut", "mute"))
        steps.restart(done, "kill-leader")
        return {k: v for k, v in started.items() if k != "steps"}

    def heal(self, ctx: NemesisContext) -> None:
        heal_all(ctx)
