"""Disk loss: a broker's log directory is gone (a replaced disk), and it comes back empty with its old id.

Kinds:
- `one` (a seeded node) and `leader` (a key's leader): the broker is killed, its log directory
  wiped, and it starts again, empty, when the fault ends;
- `last-isr` (KIP-966's motivation): on a key k with leader L, every follower is cut off from L's
  broker port (their fetches are dropped, nothing else) past the replica lag time, until L has shrunk
  the ISR to itself — from then on no write is acknowledged (min.insync.replicas 2), and every
  acknowledged one is on the followers too; then L dies, loses its disk, the cuts are lifted and L
  comes back at once, empty, still the ISR's only member. Kafka's ZooKeeper mode elects it — with
  nothing — and the followers truncate to it: acknowledged writes are gone. A correct controller
  learns from L's registration that it lost its data, keeps it out of the ISR and out of leadership,
  and elects a follower that has everything (KIP-966's eligible leader replicas).
Each step is recorded as the plain op it borrows (`start-kill`, `start-partition`); the wipe is in the
fault's value (`wiped`).
"""

from __future__ import annotations

import random
from typing import Any

from kernel.capabilities import ClusterView, Disk, Killable, Net
from kernel.db import PartitionState
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target
from kernel.system import Need
from nemesis.steps import Steps, cut, heal_all, wait_for


class DiskLossFamily:
    name: str = "disk-loss"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "one": "kill a seeded broker, wipe its log directory, start it again empty with its old id",
        "leader": "the same for a key's leader",
        "last-isr": "shrink a key's ISR to its leader, then it loses its disk and comes back at once (KIP-966)",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-disk-loss", "stop-disk-loss", "disk lost", "#784212")
    composite: bool = True
    needs: tuple[type, ...] = (Disk, Killable, Net, ClusterView)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "kill"), Need("broker", "disk-loss"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
        "last-isr": (Need("broker", "net"),),  # its followers are cut off from the leader first
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        fallback = rng.choice(world.nodes)
        key = rng.randrange(world.partitions)
        victim = Target.of_node(fallback) if kind == "one" else Target.leader(key, fallback)
        if kind != "last-isr":
            return Plan({"victim": victim}, {"key": key})
        lag = world.replica_lag_s * rng.uniform(1.3, 1.8)
        return Plan({"victim": victim}, {"key": key, "lag_s": round(lag, 2)},
                    min_duration_s=2 * lag + world.session_timeout_s)

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        steps, done = Steps(ctx, fault), out.setdefault("steps", {})
        hit = ctx.resolve(fault.targets["victim"])
        out["targets"] = {"victim": hit.to_json()}
        victim = hit.node
        if fault.kind == "last-isr":
            key = int(fault.params["key"])
            state = ctx.view().partition(ctx.topic, key)
            if state is None or state.leader is None:
                out["skipped"] = "the key has no leader"
                return out
            victim, followers = state.leader, [n for n in state.replicas if n.name != state.leader.name]
            out.update(key=key, leader=victim.name, followers=[f.name for f in followers])
            for f in followers:
                c = cut(ctx, f, victim)
                done[f"cut-{f.name}"] = (steps.start("start-partition", c), c)
            lag = float(fault.params["lag_s"])
            await ctx.sleep(lag)
            alone = await wait_for(ctx, lambda: _alone(ctx.view().partition(ctx.topic, key), victim.name), lag)
            out["isr_when_killed"] = [n.name for n in alone.isr] if alone else None
        steps.kill(done, "down", [victim])
        ctx.disk().wipe(victim)
        out["wiped"] = victim.name
        if fault.kind == "last-isr":  # the followers may fetch again; the leader comes back empty at once
            steps.lift(done, tuple(k for k in list(done) if k.startswith("cut-")))
            steps.restart(done, "down")
        return out

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        steps, done = Steps(ctx, fault), started.get("steps", {})
        steps.lift(done, tuple(k for k in list(done) if k.startswith("cut-")))
        steps.restart(done, "down")
        return {k: v for k, v in started.items() if k != "steps"}

    def heal(self, ctx: NemesisContext) -> None:
        heal_all(ctx)


def _alone(state: PartitionState | None, leader: str) -> PartitionState | None:
    """`state` once its ISR is the leader alone, else None (a probe for `wait_for`)."""
    return state if state is not None and [n.name for n in state.isr] == [leader] else None
