"""The replica manager's decision core (`logbroker/replication/decisions.py`), with no ZooKeeper,
no sockets and no event loop: state and plain inputs in, new state and effects out."""

from __future__ import annotations

from typing import Any

from logbroker.bugs import Bug
from logbroker.core.names import Role, TopicPartition
from logbroker.log.epoch_cache import LeaderEpochCache
from logbroker.protocol.errors import Err
from logbroker.replication import decisions as rules
from logbroker.replication.decisions import (
    BecomeFollower,
    BecomeLeader,
    CheckPurgatory,
    Local,
    ProposeAlterIsr,
    RemoveReplica,
    ReplicaState,
    SetEndpoints,
    SetIsr,
)
from logbroker.replication.fetch_state import FetcherState
from logbroker.replication.truncation import TruncationSearch

TP = TopicPartition("t", 0)
ME = 1


def lai(*parts: dict[str, Any], controller_epoch: int = 5, **extra: Any) -> dict[str, Any]:
    return {"type": "leader_and_isr", "controller_id": 2, "controller_epoch": controller_epoch, "partitions":
            list(parts), "brokers": [{"id": 2, "host": "h2", "port": 9002, "epoch": 7}], **extra}


def part(leader: int, epoch: int, *, tp: TopicPartition = TP, isr: tuple[int, ...] = (1, 2, 3),
         zk_version: int = 4) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition, "leader": leader, "leader_epoch": epoch,
            "isr": list(isr), "replicas": [1, 2, 3], "zk_version": zk_version}


def errors(reply: dict[str, Any] | None) -> list[int]:
    assert reply is not None
    return [r["error"] for r in reply["partitions"]]


# --- LeaderAndIsr ---------------------------------------------------------------------------------
def test_leader_and_isr_with_a_stale_leader_epoch_is_refused() -> None:
    state = ReplicaState(ME, zk_versions={TP: 9})
    local = {TP: Local(Role.FOLLOWER, 7)}
    d = rules.leader_and_isr(state, local, lai(part(ME, 6)))
    assert errors(d.reply) == [int(Err.FENCED_LEADER_EPOCH)]
    assert not [e for e in d.effects if isinstance(e, BecomeLeader | BecomeFollower | SetIsr)]
    assert d.state.zk_versions == {TP: 9}  # the stale order's version is not taken either


def test_stale_epoch_bug_obeys_a_stale_leader_epoch() -> None:
    state = ReplicaState(ME, bugs=frozenset({Bug.STALE_EPOCH_ACCEPTED}))
    d = rules.leader_and_isr(state, {TP: Local(Role.FOLLOWER, 7)}, lai(part(ME, 6)))
    assert errors(d.reply) == [0]
    assert BecomeLeader(TP, 6, (1, 2, 3), (1, 2, 3)) in d.effects


def test_a_stale_controller_epoch_is_refused_whole() -> None:
    state = ReplicaState(ME, controller_epoch=6)
    d = rules.leader_and_isr(state, {TP: Local(Role.FOLLOWER, 1)}, lai(part(ME, 2), controller_epoch=5))
    assert d.reply == {"error": int(Err.STALE_CONTROLLER_EPOCH)}
    assert d.effects == () and d.state == state
    newer = rules.leader_and_isr(state, {TP: Local(Role.FOLLOWER, 1)}, lai(part(ME, 2), controller_epoch=7))
    assert newer.state.controller_epoch == 7 and errors(newer.reply) == [0]


def test_newer_epoch_makes_leader_or_follower_and_records_the_version() -> None:
    local = {TP: Local(Role.FOLLOWER, 3)}
    lead = rules.leader_and_isr(ReplicaState(ME, pending_isr={TP: (1,)}), local, lai(part(ME, 4, zk_version=11)))
    assert lead.effects == (SetEndpoints(((2, "h2", 9002),)), BecomeLeader(TP, 4, (1, 2, 3), (1, 2, 3)),
                            CheckPurgatory())
    assert lead.state.zk_versions == {TP: 11} and lead.state.pending_isr == {}  # a new term drops a proposal
    follow = rules.leader_and_isr(ReplicaState(ME), local, lai(part(2, 4)))
    assert BecomeFollower(TP, 2, 4, (1, 2, 3)) in follow.effects


def test_same_epoch_only_updates_the_isr() -> None:
    d = rules.leader_and_isr(ReplicaState(ME), {TP: Local(Role.LEADER, 4, (1, 2, 3))}, lai(part(ME, 4, isr=(1, 2))))
    assert SetIsr(TP, (1, 2)) in d.effects
    assert not [e for e in d.effects if isinstance(e, BecomeLeader | BecomeFollower)]
    # INIT from a new controller re-sends the same epoch: the role is taken again (seed 003 D)
    init = rules.leader_and_isr(ReplicaState(ME), {TP: Local(Role.LEADER, 4)}, lai(part(ME, 4), init=True))
    assert BecomeLeader(TP, 4, (1, 2, 3), (1, 2, 3)) in init.effects


def test_full_leader_and_isr_sets_unlisted_replicas_aside() -> None:
    other = TopicPartition("t", 1)
    state = ReplicaState(ME, zk_versions={other: 3}, pending_isr={other: (1,)})
    local = {TP: Local(Role.NONE, 0), other: Local(Role.LEADER, 2)}
    d = rules.leader_and_isr(state, local, lai(part(2, 1), full=True, controller_epoch=8))
    assert RemoveReplica(other, delete=False, aside="8.stray") in d.effects
    assert RemoveReplica(TP, delete=False, aside="8.stray") not in d.effects
    assert other not in d.state.zk_versions and other not in d.state.pending_isr


# --- becoming follower truncates per OffsetForLeaderEpoch ----------------------------------------
def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache(None)
    for e, o in entries:
        c.assign(e, o)
    return c


def test_becoming_follower_truncates_per_offset_for_leader_epoch_not_to_hw() -> None:
    """The follower led epoch 2 from offset 8 (records 8..11 reached no one); the new leader kept
    epoch 1 up to offset 10 and leads epoch 3. Asked about epoch 2, the leader answers (1, 10); epoch 1
    ends at 8 in the follower's own cache, so it cuts at min(10, 8) = 8 (KIP-279): neither at its HW
    (5: records 5..7, which the leader has, would be fetched again) nor at its LEO (a divergent tail)."""
    follower = cache((0, 0), (1, 3), (2, 8))
    leader = cache((0, 0), (1, 3), (3, 10))
    leo, hw = 12, 5
    d = rules.leader_and_isr(ReplicaState(ME), {TP: Local(Role.LEADER, 2)}, lai(part(2, 3)))
    (become,) = [e for e in d.effects if isinstance(e, BecomeFollower)]
    # the runner hands the partition to its leader's fetcher, which starts with truncation
    fetcher = FetcherState()
    fetcher.add((become.tp.topic, become.tp.partition), become.epoch, leo)
    assert fetcher.to_truncate() == {("t", 0): 3} and fetcher.fetchable() == {}
    search = TruncationSearch(follower, leo, hw)
    rounds = 0
    while (asked := search.question()) is not None:
        rounds += 1
        # the leader's side of OffsetForLeaderEpoch (ReplicaManager._offset_for_leader_epoch)
        assert rules.fenced_epoch(ReplicaState(2), become.epoch, 3) is Err.NONE
        search.answer(*leader.end_offset_for(asked, 14))
    assert search.result == 8 and rounds == 1
    fetcher.truncated(("t", 0), 3, search.result)
    assert fetcher.fetchable()[("t", 0)].fetch_offset == 8


def test_offset_for_leader_epoch_fences_old_and_unknown_epochs() -> None:
    s = ReplicaState(ME)
    assert rules.fenced_epoch(s, 2, 3) is Err.FENCED_LEADER_EPOCH
    assert rules.fenced_epoch(s, 4, 3) is Err.UNKNOWN_LEADER_EPOCH
    assert rules.fenced_epoch(s, -1, 3) is Err.NONE
    assert rules.fenced_epoch(ReplicaState(ME, bugs=frozenset({Bug.STALE_EPOCH_ACCEPTED})), 2, 3) is Err.NONE


# --- StopReplica ---------------------------------------------------------------------------------
def test_stop_replica_older_than_our_epoch_is_refused() -> None:
    state = ReplicaState(ME, zk_versions={TP: 2})
    body = {"controller_epoch": 5, "delete": True, "partitions": [{"topic": "t", "partition": 0, "leader_epoch": 3}]}
    d = rules.stop_replica(state, {TP: Local(Role.FOLLOWER, 4)}, body)
    assert errors(d.reply) == [int(Err.FENCED_LEADER_EPOCH)] and d.effects == ()
    ok = rules.stop_replica(state, {TP: Local(Role.FOLLOWER, 3)}, body)
    assert errors(ok.reply) == [0] and ok.effects == (RemoveReplica(TP, delete=True),)
    assert ok.state.zk_versions == {}


# --- ISR upkeep (KIP-497) ------------------------------------------------------------------------
def leader(isr: tuple[int, ...], caught_up: dict[int, int], epoch: int = 4, hw: int = 10) -> Local:
    return Local(Role.LEADER, epoch, isr, (1, 2, 3), hw, caught_up)


def test_isr_shrink_proposes_alter_isr_and_does_not_shrink_locally() -> None:
    state = ReplicaState(ME, zk_versions={TP: 6})
    local = {TP: leader((1, 2, 3), {2: 10_000, 3: 1_000})}
    d = rules.isr_upkeep(state, local, now_ms=12_000, max_lag_ms=3_000)
    assert d.effects == (ProposeAlterIsr(TP, (1, 2), 4),)  # 3 lagged 11 s; 2 only 2 s
    assert d.state.pending_isr == {TP: (1, 2)}
    # while that proposal is in flight, no second one
    assert rules.isr_upkeep(d.state, local, now_ms=20_000, max_lag_ms=3_000).effects == ()
    # the request carries the version the leader knows, and the ISR as it still is
    body = rules.alter_isr_request(d.state, TP, local[TP], ProposeAlterIsr(TP, (1, 2), 4), broker_epoch=77)
    assert body is not None and body["isr"] == [1, 2] and body["old_isr"] == [1, 2, 3]
    assert body["zk_version"] == 6 and body["broker_epoch"] == 77 and body["leader_epoch"] == 4


def test_local_isr_shrink_bug_shrinks_before_the_controller_agrees() -> None:
    state = ReplicaState(ME, bugs=frozenset({Bug.LOCAL_ISR_SHRINK}))
    d = rules.isr_upkeep(state, {TP: leader((1, 2, 3), {2: 0, 3: 0})}, now_ms=10_000, max_lag_ms=3_000)
    assert d.effects == (SetIsr(TP, (1,), advance_hw=True), ProposeAlterIsr(TP, (1,), 4))


def test_followers_do_not_shrink_and_idle_followers_stay() -> None:
    local = {TP: Local(Role.FOLLOWER, 4, (1, 2, 3), (1, 2, 3), 0, {2: 0})}
    assert rules.isr_upkeep(ReplicaState(ME), local, 100_000, 3_000).effects == ()
    caught = {TP: leader((1, 2, 3), {2: 9_000, 3: 9_500})}
    assert rules.isr_upkeep(ReplicaState(ME), caught, 10_000, 3_000).effects == ()


def test_alter_isr_reply_commits_only_for_the_same_leader_epoch() -> None:
    proposal = ProposeAlterIsr(TP, (1, 2), 4)
    state = ReplicaState(ME, zk_versions={TP: 6}, pending_isr={TP: (1, 2)})
    reply = {"error": 0, "isr": [1, 2], "zk_version": 7}
    d = rules.alter_isr_reply(state, TP, leader((1, 2, 3), {}), proposal, reply)
    assert d.effects == (SetIsr(TP, (1, 2), advance_hw=True),) and d.state.zk_versions == {TP: 7}
    moved_on = rules.alter_isr_reply(state, TP, leader((1, 2, 3), {}, epoch=5), proposal, reply)
    assert moved_on.effects == () and moved_on.state.zk_versions == {TP: 6}
    stale = {"error": int(Err.INVALID_UPDATE_VERSION), "isr": [1, 2, 3], "zk_version": 9}
    d2 = rules.alter_isr_reply(state, TP, leader((1, 2), {}), proposal, stale)
    assert d2.effects == (SetIsr(TP, (1, 2, 3)),) and d2.state.zk_versions == {TP: 9}
    refused = rules.alter_isr_reply(state, TP, leader((1, 2, 3), {}), proposal, {"error": int(Err.FENCED_LEADER_EPOCH)})
    assert refused.effects == ()
    assert rules.alter_isr_done(d.state, TP).pending_isr == {}
    # a proposal whose term is over is not sent at all
    assert rules.alter_isr_request(state, TP, leader((1, 2, 3), {}, epoch=5), proposal, 1) is None


def test_a_caught_up_follower_is_proposed_for_the_isr_at_once() -> None:
    cur = leader((1, 2), {}, hw=10)
    d = rules.follower_fetched(ReplicaState(ME), TP, cur, 3, 10)
    # counted for HW at once, but not committed (min ISR waits for the controller: KAFKA-15583)
    assert d.effects == (SetIsr(TP, (1, 2, 3), committed=False), ProposeAlterIsr(TP, (1, 2, 3), 4))
    assert rules.follower_fetched(ReplicaState(ME), TP, cur, 3, 9).effects == ()  # below HW
    assert rules.follower_fetched(ReplicaState(ME), TP, cur, 4, 10).effects == ()  # not a replica
    busy = ReplicaState(ME, pending_isr={TP: (1,)})
    assert rules.follower_fetched(busy, TP, cur, 3, 10).effects == ()  # one proposal at a time


def test_truncation_walks_down_diverged_epochs() -> None:
    """Follower epochs 0@0, 2@5, 4@8 (LEO 12); leader epochs 0@0, 1@3, 3@6 (LEO 14). Asked about 4, the
    leader answers (3, 14): we have no epoch 3, our epoch 2 ends at 8. Asked about 2: (1, 6); our
    epoch 0 ends at 5. Asked about 0: (0, 3). The cut is 3, where the logs last agreed; HW 4 would
    keep offset 3, which the leader wrote in another epoch."""
    search = TruncationSearch(cache((0, 0), (2, 5), (4, 8)), 12, 4)
    leader = cache((0, 0), (1, 3), (3, 6))
    asked = []
    while (e := search.question()) is not None:
        asked.append(e)
        search.answer(*leader.end_offset_for(e, 14))
    assert asked == [4, 2, 0] and search.result == 3
