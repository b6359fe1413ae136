"""The replica manager's decisions as pure state transitions (issue 18: the decision core).

Each function takes the manager's `ReplicaState`, a view of the local replicas (`Local`, plain
values read from the partitions) and one input — a LeaderAndIsr, a StopReplica, an UpdateMetadata's
controller epoch, a follower's fetch, an ISR upkeep tick, an AlterIsr reply — and returns a
`Decision`: the new state, the effects to perform in order, and the reply to send. Nothing here
reads a clock, touches a log, a socket, ZooKeeper or the event loop; `manager.py` is the asyncio
runner that performs the effects. A simulator can drive these functions directly, and the tests in
`tests/unit/test_replica_decisions.py` do.

The rules (seed 003 C, E, G; KIP-101/279; KIP-497):
- a request from an older controller epoch than the newest seen is refused (STALE_CONTROLLER_EPOCH);
- per partition, a LeaderAndIsr with an older leader epoch than the replica's is refused
  (FENCED_LEADER_EPOCH); one at the same epoch only updates the ISR (an AlterIsr was committed);
  a newer one makes the replica leader or follower — a follower truncates per OffsetForLeaderEpoch
  before it fetches (`BecomeFollower`; the fetcher runs `truncation.TruncationSearch`);
- a LeaderAndIsr marked `full` lists every replica this broker hosts: any other is set aside;
- a StopReplica older than the replica's leader epoch is refused;
- a leader never writes its ISR to the store: it proposes AlterIsr to the controller. An expansion
  counts for HW at once; a shrink takes effect only once the controller committed it.
Bug switches change exactly one rule each (`logbroker/bugs.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from logbroker.bugs import Bug
from logbroker.core.names import Role, TopicPartition
from logbroker.probes import probe
from logbroker.protocol.errors import Err

_STALE_CONTROLLER = probe("stale-controller-epoch-order")
_STALE_LEADER_EPOCH = probe("stale-leader-epoch-order")
_STALE_ISR_VERSION = probe("leader-and-isr-stale-isr-version")
_EPOCH_FENCED = probe("offsets-for-epoch-fenced")
_ISR_EXPAND = probe("isr-expand-proposed")
_ISR_SHRINK = probe("isr-shrink-proposed")

STALE_CONTROLLER_EPOCH = int(Err.STALE_CONTROLLER_EPOCH)


# --- state and inputs ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReplicaState:
    """What the replica manager itself remembers (the partitions hold the rest)."""

    broker_id: int
    bugs: frozenset[Bug] = frozenset()
    controller_epoch: int = 0  # the newest controller epoch seen
    zk_versions: Mapping[TopicPartition, int] = field(default_factory=dict)  # partition state znode versions
    pending_isr: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)  # AlterIsr in flight

    def stale_accepted(self) -> bool:
        return Bug.STALE_EPOCH_ACCEPTED in self.bugs


@dataclass(frozen=True, slots=True)
class Local:
    """A local replica as the decisions see it."""

    role: Role
    leader_epoch: int
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    hw: int = 0
    caught_up_ms: Mapping[int, int] = field(default_factory=dict)  # follower -> when it was last caught up


# --- effects -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SetEndpoints:
    """Remember where these brokers listen (for fetchers and requests to the controller)."""

    brokers: tuple[tuple[int, str, int], ...]


@dataclass(frozen=True, slots=True)
class BecomeLeader:
    """Stop fetching; lead at `epoch` (epoch cache entry at LEO), track followers from now."""

    tp: TopicPartition
    epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    """Stop fetching; follow `leader` at `epoch`: truncate per OffsetForLeaderEpoch, then fetch
    (nobody to follow when `leader` is -1)."""

    tp: TopicPartition
    leader: int
    epoch: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SetIsr:
    """Set the replica's ISR; `advance_hw`: then recompute HW and complete waiting requests.
    `committed`: False for KIP-497's expansion that counts before the controller wrote it (the
    leader's maximal ISR): HW is computed over it, but it does not lift the partition to
    min.insync.replicas (`Partition.maybe_advance_hw`)."""

    tp: TopicPartition
    isr: tuple[int, ...]
    advance_hw: bool = False
    committed: bool = True


@dataclass(frozen=True, slots=True)
class RemoveReplica:
    """Stop fetching and serving `tp`; delete its log (`delete`), set it aside as `<dir>.<aside>`, or
    leave it on disk."""

    tp: TopicPartition
    delete: bool
    aside: str | None = None


@dataclass(frozen=True, slots=True)
class ProposeAlterIsr:
    """Send AlterIsr to the controller (KIP-497); its reply goes to `alter_isr_reply`."""

    tp: TopicPartition
    isr: tuple[int, ...]
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class CheckPurgatory:
    """Complete waiting produces and fetches whose condition now holds."""


Effect = SetEndpoints | BecomeLeader | BecomeFollower | SetIsr | RemoveReplica | ProposeAlterIsr | CheckPurgatory


@dataclass(frozen=True, slots=True)
class Decision:
    state: ReplicaState
    effects: tuple[Effect, ...] = ()
    reply: dict[str, Any] | None = None


# --- helpers -------------------------------------------------------------------------------------
def _without(m: Mapping[TopicPartition, Any], tps: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
    drop = set(tps)
    return {k: v for k, v in m.items() if k not in drop}


def _endpoints(brokers: Iterable[Mapping[str, Any]]) -> SetEndpoints:
    return SetEndpoints(tuple((int(b["id"]), str(b["host"]), int(b["port"])) for b in brokers))


def controller_request(state: ReplicaState, epoch: int) -> tuple[ReplicaState, bool]:
    """A request from the controller of `epoch`: (new state, refused as stale)."""
    if epoch < state.controller_epoch:
        _STALE_CONTROLLER()
        if not state.stale_accepted():
            return state, True
    return replace(state, controller_epoch=max(state.controller_epoch, epoch)), False


def _partition_result(tp: TopicPartition, err: int) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition, "error": err}


# --- controller requests -------------------------------------------------------------------------
def leader_and_isr(state: ReplicaState, local: Mapping[TopicPartition, Local], body: Mapping[str, Any]) -> Decision:
    """Seed 003 C. `local` must hold every partition the request lists (the runner opens them first)
    and every other local replica (for `full`)."""
    state, stale = controller_request(state, int(body["controller_epoch"]))
    if stale:
        return Decision(state, (), {"error": STALE_CONTROLLER_EPOCH})
    effects: list[Effect] = []
    if body.get("brokers"):
        effects.append(_endpoints(body["brokers"]))
    zk = dict(state.zk_versions)
    pending = dict(state.pending_isr)
    results = []
    for m in body["partitions"]:
        tp = TopicPartition(m["topic"], int(m["partition"]))
        cur = local.get(tp, Local(Role.NONE, 0))
        epoch = int(m["leader_epoch"])
        if epoch < cur.leader_epoch:
            _STALE_LEADER_EPOCH()
        if epoch < cur.leader_epoch and not state.stale_accepted():
            results.append(_partition_result(tp, int(Err.FENCED_LEADER_EPOCH)))
            continue
        same_epoch = epoch == cur.leader_epoch and cur.role is not Role.NONE and not body.get("init")
        if same_epoch and int(m["zk_version"]) < zk.get(tp, -1):
            # a late delivery (see the controller's `_tell`): its ISR is older than the one we hold
            _STALE_ISR_VERSION()
            results.append(_partition_result(tp, 0))
            continue
        zk[tp] = int(m["zk_version"])
        if same_epoch:
            # same epoch: only the ISR/version may have moved (AlterIsr committed)
            effects.append(SetIsr(tp, tuple(m["isr"])))
        elif int(m["leader"]) == state.broker_id:
            pending.pop(tp, None)
            effects.append(BecomeLeader(tp, epoch, tuple(m["isr"]), tuple(m["replicas"])))
        else:
            effects.append(BecomeFollower(tp, int(m["leader"]), epoch, tuple(m["replicas"])))
        results.append(_partition_result(tp, 0))
    if body.get("full"):
        listed = {TopicPartition(m["topic"], int(m["partition"])) for m in body["partitions"]}
        gone = [tp for tp in local if tp not in listed]
        effects += [RemoveReplica(tp, delete=False, aside=f"{state.controller_epoch}.stray") for tp in gone]
        zk, pending = _without(zk, gone), _without(pending, gone)
    effects.append(CheckPurgatory())
    return Decision(replace(state, zk_versions=zk, pending_isr=pending), tuple(effects),
                    {"error": 0, "partitions": results})


def stop_replica(state: ReplicaState, local: Mapping[TopicPartition, Local], body: Mapping[str, Any]) -> Decision:
    """Seed 003 C stopReplica: stop fetching and serving, delete the log if asked. An order that
    carries an older leader epoch than ours is from before a change we already know of."""
    state, stale = controller_request(state, int(body["controller_epoch"]))
    if stale:
        return Decision(state, (), {"error": STALE_CONTROLLER_EPOCH})
    delete = bool(body.get("delete"))
    effects: list[Effect] = []
    stopped = []
    results = []
    for m in body["partitions"]:
        tp = TopicPartition(m["topic"], int(m["partition"]))
        cur = local.get(tp)
        epoch = int(m.get("leader_epoch", -1))
        if cur is not None and 0 <= epoch < cur.leader_epoch:
            _STALE_LEADER_EPOCH()
        if cur is not None and 0 <= epoch < cur.leader_epoch and not state.stale_accepted():
            results.append(_partition_result(tp, int(Err.FENCED_LEADER_EPOCH)))
            continue
        stopped.append(tp)
        effects.append(RemoveReplica(tp, delete=delete))
        results.append(_partition_result(tp, 0))
    new = replace(state, zk_versions=_without(state.zk_versions, stopped),
                  pending_isr=_without(state.pending_isr, stopped))
    return Decision(new, tuple(effects), {"error": 0, "partitions": results})


def fenced_epoch(state: ReplicaState, current: int, leader_epoch: int) -> Err:
    """A request (OffsetForLeaderEpoch) that names the leader epoch it believes current: NONE when it
    matches ours (or names none), else FENCED (older) or UNKNOWN (newer) LEADER_EPOCH."""
    if current < 0 or current == leader_epoch:
        return Err.NONE
    _EPOCH_FENCED()
    if state.stale_accepted():
        return Err.NONE
    return Err.FENCED_LEADER_EPOCH if current < leader_epoch else Err.UNKNOWN_LEADER_EPOCH


# --- ISR upkeep (leader) --------------------------------------------------------------------------
def follower_fetched(state: ReplicaState, tp: TopicPartition, cur: Local, replica_id: int,
                     fetch_offset: int) -> Decision:
    """A follower outside the ISR fetched at `fetch_offset` (we lead `tp`): once it reaches HW, propose
    it for the ISR. KIP-497: an expansion counts at once (a bigger ISR only makes HW more careful);
    the runner recomputes HW after every follower fetch anyway."""
    if replica_id in cur.isr or fetch_offset < cur.hw or replica_id not in cur.replicas or tp in state.pending_isr:
        return Decision(state)
    new_isr = tuple(sorted({*cur.isr, replica_id}))
    _ISR_EXPAND()
    return Decision(replace(state, pending_isr={**state.pending_isr, tp: new_isr}),
                    (SetIsr(tp, new_isr, committed=False), ProposeAlterIsr(tp, new_isr, cur.leader_epoch)))


def lagging_followers(cur: Local, broker_id: int, now_ms: int, max_lag_ms: int) -> list[int]:
    """ISR members not caught up within `max_lag_ms` (replica.lag.time.max.ms; seed 001)."""
    return [r for r in cur.isr if r != broker_id and now_ms - cur.caught_up_ms.get(r, now_ms) > max_lag_ms]


def isr_upkeep(state: ReplicaState, local: Mapping[TopicPartition, Local], now_ms: int,
               max_lag_ms: int) -> Decision:
    """Drop followers that lag too long — through the controller: AlterIsr is proposed, and the ISR
    shrinks only when the reply commits it, and one proposal at a time. Only the `local-isr-shrink`
    bug shrinks it here first, and, as a leader deciding alone would (Kafka before KIP-497, writing
    the ISR itself), again at a later tick for a follower that falls behind while an earlier proposal
    still waits: a frozen controller must not stop the buggy leader halfway (a CI run of
    test_local_isr_shrink saw its two frozen followers cross the lag limit one tick apart)."""
    pending = dict(state.pending_isr)
    effects: list[Effect] = []
    alone = Bug.LOCAL_ISR_SHRINK in state.bugs
    for tp, cur in local.items():
        if cur.role is not Role.LEADER or (tp in pending and not alone):
            continue
        laggards = lagging_followers(cur, state.broker_id, now_ms, max_lag_ms)
        if not laggards:
            continue
        new_isr = tuple(r for r in cur.isr if r not in laggards)
        _ISR_SHRINK()
        if alone:
            effects.append(SetIsr(tp, new_isr, advance_hw=True))  # before KIP-497: the leader decides alone
        pending[tp] = new_isr
        effects.append(ProposeAlterIsr(tp, new_isr, cur.leader_epoch))
    return Decision(replace(state, pending_isr=pending), tuple(effects))


def alter_isr_request(state: ReplicaState, tp: TopicPartition, cur: Local, proposal: ProposeAlterIsr,
                      broker_epoch: int) -> dict[str, Any] | None:
    """The AlterIsr body for a proposal; None once it is moot (no longer leader at that epoch)."""
    if cur.role is not Role.LEADER or cur.leader_epoch != proposal.leader_epoch:
        return None
    return {"type": "alter_isr", "broker_id": state.broker_id, "broker_epoch": broker_epoch,
            "topic": tp.topic, "partition": tp.partition, "leader_epoch": proposal.leader_epoch,
            "isr": list(proposal.isr), "old_isr": list(cur.isr), "zk_version": state.zk_versions.get(tp, -1)}


def alter_isr_reply(state: ReplicaState, tp: TopicPartition, cur: Local, proposal: ProposeAlterIsr,
                    reply: Mapping[str, Any]) -> Decision:
    """The controller answered (not NOT_CONTROLLER: the runner retries those). Committed: the ISR
    takes effect now, if we still lead at that epoch. INVALID_UPDATE_VERSION: our view was old; take
    the controller's. Anything else: give up (the next upkeep tick may propose again)."""
    zk = dict(state.zk_versions)
    effects: tuple[Effect, ...] = ()
    if reply.get("error") == 0:
        if cur.leader_epoch == proposal.leader_epoch:
            zk[tp] = int(reply["zk_version"])
            effects = (SetIsr(tp, tuple(reply["isr"]), advance_hw=True),)
    elif reply.get("error") == Err.INVALID_UPDATE_VERSION and "zk_version" in reply:
        zk[tp] = int(reply["zk_version"])
        effects = (SetIsr(tp, tuple(reply["isr"])),)
    return Decision(replace(state, zk_versions=zk), effects)


def alter_isr_done(state: ReplicaState, tp: TopicPartition) -> ReplicaState:
    """The proposal is settled (answered, moot or given up): a new one may be made."""
    return replace(state, pending_isr=_without(state.pending_isr, [tp]))
