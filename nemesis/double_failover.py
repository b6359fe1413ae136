"""Double failover (seed 004 / KIP-101 scenario 1; KIP-279): the truncated replica becomes leader.

Before KIP-101 a replica that became a follower cut its log to its high watermark. Its HW lags the
leader's by one fetch, so the cut drops records the leader had already acknowledged; the replica
fetches them back — unless it is elected leader first. This composition builds exactly that:

0. on key k, leader L1 with in-sync followers N (next in line: first in assignment order) and R.
   First N's broker is paused for half a second (`hold`): L1's HW cannot pass what N holds while R
   keeps fetching, so R's log runs ahead of the HW it was told. Then R stops hearing L1's broker
   answers while its requests still arrive (a `partition` step of kind `mute`), and only then N runs
   again: N catches up, L1 counts R's last fetch and acknowledges everything written during the
   hold, and R never learns the HW that moved. Both steps are far below the replica lag time and
   the ZooKeeper session. Without the hold the window was whatever one fetch round trip left between
   R's log end and its HW, often nothing: a leader answers a waiting fetch as soon as its HW moves,
   so R usually knew the HW of everything it had (the mute alone caught the planted bug in 3 of 5
   container seeds, as did the composition before the mute; with the hold, 5 of 5);
1. cut R off from N's broker port (R cannot fetch from N; ZooKeeper, the controller and clients
   are untouched) — a `partition` step of kind `cut`;
2. kill L1 (a `kill` step); the controller elects N, R becomes N's follower (and truncates);
3. kill N before R fetched back what it cut or was dropped from the ISR, so R is elected next.
`stop` heals the cuts and restarts N and L1 (and resumes N if the run stopped during the hold).
With correct truncation (OffsetForLeaderEpoch, which R cannot even ask N) R keeps every acknowledged
record and nothing is lost; with `truncate-to-hw` acknowledged writes vanish.
If R is the controller the cut would also stop its requests to N and the scenario would degenerate,
so the planned key is a preference: the first key from it whose roles avoid that is used. The fault's
value says which key and which roles the nodes had.
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import ClusterView, Killable, Net, Pausable
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need
from nemesis.steps import Steps, cut, heal_all, leader_other_than, mute, planned_roles, wait_for

#: How long the next leader is held (paused) while the survivor fetches ahead of the HW: spread over
#: a few keys, 20 writes/s already put some on the key; far below
#: replica.lag.time.max.ms (10 s) and the ZooKeeper session, so nobody leaves the ISR. A constant, not
#: a draw, so that adding the step did not move any other seeded choice of a schedule.
HOLD_S = 0.5


class DoubleFailoverFamily:
    name: str = "double-failover"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "kill": "kill a key's leader, then the next before the truncated replica caught up: it is elected (KIP-101)",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-double-failover", "stop-double-failover", "double failover", "#C0392B")
    composite: bool = True
    needs: tuple[type, ...] = (Net, Killable, Pausable, ClusterView)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "kill"), Need("broker", "net"), Need("broker", "pause"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        key = rng.randrange(world.partitions)
        return Plan({"first": Target.leader(key, rng.choice(world.nodes))},
                    {"key": key, "settle_s": round(rng.uniform(0.3, 1.5), 2),
                     "mute_s": round(rng.uniform(0.2, 0.6), 2), "session_timeout_s": world.session_timeout_s},
                    min_duration_s=3 * world.session_timeout_s + 5)

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        steps, done = Steps(ctx, fault), out.setdefault("steps", {})
        roles = planned_roles(ctx, fault, out)
        if roles is None:
            return out
        key, l1, nxt, survivor = roles
        out.update(key=key, first_leader=l1.name, next_leader=nxt.name, survivor=survivor.name)
        steps.pause(done, "hold", nxt)
        await ctx.sleep(HOLD_S)  # R fetches on; L1's HW stays where N stopped
        m = mute(ctx, survivor, l1)
        done["mute"] = (steps.start("start-partition", m), m)
        steps.resume(done, "hold")
        await ctx.sleep(float(fault.params.get("mute_s", 0.0)))  # N catches up; the HW passes R's log end
        c = cut(ctx, survivor, nxt)
        done["cut"] = (steps.start("start-partition", c), c)
        steps.kill(done, "kill-first", [l1])
        timeout = 4 * max(1.0, float(fault.params.get("session_timeout_s", 6.0)))
        elected = await wait_for(ctx, lambda: leader_other_than(ctx, key, {l1.name}), timeout)
        out["elected"] = elected.name if elected else None
        if elected is None or elected.name != nxt.name:
            return out  # nobody elected in time, or not the one predicted: the cut protects nothing
        await ctx.sleep(float(fault.params["settle_s"]))  # the survivor takes its LeaderAndIsr (and truncates)
        steps.kill(done, "kill-next", [nxt])
        last = await wait_for(ctx, lambda: leader_other_than(ctx, key, {l1.name, nxt.name}), timeout)
        out["finally_elected"] = last.name if last else None
        return out

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        steps, done = Steps(ctx, fault), started.get("steps", {})
        steps.resume(done, "hold")
        steps.lift(done, ("cut", "mute"))
        for step in ("kill-next", "kill-first"):  # the last one down comes back first
            steps.restart(done, step)
        return {k: v for k, v in started.items() if k != "steps"}

    def heal(self, ctx: NemesisContext) -> None:
        heal_all(ctx, resume=True)

