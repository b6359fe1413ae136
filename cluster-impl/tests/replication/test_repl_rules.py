"""The controller's pure rules for reassignment, operator elections and leader rebalance.

Property tests state what must hold for *any* cluster shape, because these rules are what keeps an
operator's request from losing committed data: leadership only ever moves to a live ISR member,
the ISR never holds an unassigned replica, and a move finishes only when every target replica
has caught up.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from logbroker.controller.decisions import ElectionType, imbalanced, place_replicas, requested_election
from logbroker.controller.reassignment import completion_state, start_state, validate_target
from logbroker.coord.model import PartitionState, ReplicaAssignment, assignment_from_json, assignment_to_json
from logbroker.protocol.errors import Err

BROKERS = list(range(1, 7))
replica_lists = st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True)


@st.composite
def cluster(draw: st.DrawFn) -> tuple[ReplicaAssignment, PartitionState, set[int]]:
    """A partition (possibly mid-move), its state, and the live brokers."""
    asg = ReplicaAssignment(tuple(draw(replica_lists)))
    if draw(st.booleans()):
        asg = asg.reassign_to(draw(replica_lists))
    live = set(draw(st.lists(st.sampled_from(BROKERS), unique=True)))
    isr = tuple(draw(st.lists(st.sampled_from(list(asg.replicas)), min_size=1, unique=True)))
    leader = draw(st.sampled_from([*isr, -1]))
    return asg, PartitionState(leader, draw(st.integers(0, 50)), isr, 3), live


# --- the assignment model ------------------------------------------------------------------------
@given(replica_lists, replica_lists)
def test_reassign_to_keeps_both_sets_until_completion(original: list[int], target: list[int]) -> None:
    a = ReplicaAssignment(tuple(original)).reassign_to(target)
    assert set(a.replicas) == set(original) | set(target)
    assert set(a.target) == set(target) and a.original == tuple(original), "the original order survives"
    assert not set(a.adding) & set(original) and not set(a.removing) & set(target)
    assert a.completed(target) == ReplicaAssignment(tuple(target))
    assert assignment_from_json(assignment_to_json({0: a})) == {0: a}


@given(replica_lists, replica_lists, replica_lists)
def test_a_second_move_starts_from_the_original_replicas(original: list[int], first: list[int],
                                                         second: list[int]) -> None:
    """Redirecting a running move must not keep the first move's new replicas around (KIP-455)."""
    a = ReplicaAssignment(tuple(original)).reassign_to(first).reassign_to(second)
    assert set(a.replicas) == set(original) | set(second)
    assert set(a.original) == set(original)


def test_cancel_goes_back_to_the_original_replicas() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([4, 2, 3])
    assert moving.replicas == (1, 2, 3, 4) and moving.adding == (4,) and moving.removing == (1,)
    cancelled = moving.reassign_to(list(moving.original))
    assert cancelled == ReplicaAssignment((1, 2, 3))


def test_topic_znode_of_an_older_version_reads_as_not_moving() -> None:
    raw = b'{"version": 1, "partitions": {"0": [1, 2], "1": [2, 3]}}'
    assert assignment_from_json(raw) == {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))}


# --- reassignment steps ----------------------------------------------------------------------------
@given(cluster())
def test_completion_waits_for_every_target_replica_and_only_elects_live_isr(c: tuple) -> None:  # type: ignore[type-arg]
    asg, state, live = c
    new = completion_state(state, asg.target, live, 4)
    if not set(asg.target) <= set(state.isr):
        assert new is None, "a move must not finish before every target replica is in the ISR"
        return
    if new is None:  # no live ISR member in the target could lead: it must wait
        assert not any(r in live and r in state.isr for r in asg.target)
        return
    assert new.leader in asg.target and new.leader in state.isr and new.leader in live
    assert set(new.isr) <= set(asg.target) and new.leader in new.isr
    assert new.leader_epoch == state.leader_epoch + 1 and new.controller_epoch == 4


@given(cluster(), replica_lists)
def test_start_keeps_the_isr_inside_the_new_assignment(c: tuple, target: list[int]) -> None:  # type: ignore[type-arg]
    asg, state, live = c
    new_asg = asg.reassign_to(target)
    err, _ = validate_target(target, asg, state, live)
    if err != Err.NONE:
        return
    new = start_state(state, new_asg, live, 4)
    assert set(new.isr) <= set(new_asg.replicas)
    assert new.leader_epoch == state.leader_epoch + 1, "every replica must learn the new AR"
    if new.leader >= 0:
        assert new.leader in state.isr and new.leader in live
    if state.leader in new_asg.replicas and state.leader in live:
        assert new.leader == state.leader, "starting a move does not move leadership"


def test_validate_target_refusals() -> None:
    asg, st_ = ReplicaAssignment((1, 2, 3)), PartitionState(1, 5, (1, 2, 3), 1)
    live = {1, 2, 3, 4}
    assert validate_target([], asg, st_, live)[0] == Err.INVALID_REPLICA_ASSIGNMENT
    assert validate_target([2, 2], asg, st_, live)[0] == Err.INVALID_REPLICA_ASSIGNMENT
    assert validate_target([2, 9], asg, st_, live)[0] == Err.INVALID_REPLICA_ASSIGNMENT
    assert validate_target([2, 4], asg, st_, live, allow_rf_change=False)[0] == Err.INVALID_REPLICATION_FACTOR
    assert validate_target([4, 2, 3], asg, st_, live) == (Err.NONE, None)
    assert validate_target([1, 2, 3], asg.reassign_to([4, 2, 3]), st_, {2, 3, 4}) == (Err.NONE, None), \
        "cancelling back to a replica that is down is allowed"


# --- elections ---------------------------------------------------------------------------------
def test_preferred_election_needs_the_preferred_replica_alive_and_in_sync() -> None:
    replicas = [1, 2, 3]
    led_by_2 = PartitionState(2, 7, (1, 2, 3), 1)
    err, e = requested_election(ElectionType.PREFERRED, replicas, led_by_2, {1, 2, 3})
    assert err == Err.NONE and e is not None and e.leader == 1 and e.isr == (1, 2, 3)
    err, _ = requested_election(ElectionType.PREFERRED, replicas, PartitionState(2, 7, (2, 3), 1), {1, 2, 3})
    assert err == Err.PREFERRED_LEADER_NOT_AVAILABLE, "1 is alive but out of sync: moving there loses data"
    err, _ = requested_election(ElectionType.PREFERRED, replicas, led_by_2, {2, 3})
    assert err == Err.PREFERRED_LEADER_NOT_AVAILABLE
    err, _ = requested_election(ElectionType.PREFERRED, replicas, PartitionState(1, 7, (1, 2), 1), {1, 2, 3})
    assert err == Err.ELECTION_NOT_NEEDED


def test_unclean_election_only_for_a_partition_without_a_live_leader() -> None:
    replicas = [1, 2, 3]
    err, _ = requested_election(ElectionType.UNCLEAN, replicas, PartitionState(1, 3, (1,), 1), {1, 2})
    assert err == Err.ELECTION_NOT_NEEDED
    err, e = requested_election(ElectionType.UNCLEAN, replicas, PartitionState(-1, 3, (1,), 1), {2, 3})
    assert err == Err.NONE and e is not None and e.leader == 2 and e.unclean
    err, _ = requested_election(ElectionType.UNCLEAN, replicas, PartitionState(-1, 3, (1,), 1), {4})
    assert err == Err.ELIGIBLE_LEADERS_NOT_AVAILABLE


@given(st.dictionaries(st.integers(0, 20), st.tuples(replica_lists, st.sampled_from(BROKERS)), min_size=1),
       st.lists(st.sampled_from(BROKERS), unique=True), st.integers(0, 100))
def test_rebalance_only_proposes_safe_moves(parts: dict, live_l: list[int], pct: int) -> None:  # type: ignore[type-arg]
    view = {k: (r, PartitionState(leader, 1, tuple(r), 1)) for k, (r, leader) in parts.items()}
    live = set(live_l)
    for k in imbalanced(view, live, pct):
        replicas, state = view[k]
        assert replicas[0] in live and replicas[0] in state.isr and state.leader != replicas[0]


def test_rebalance_threshold() -> None:
    """Broker 1 is preferred for 4 partitions and leads 3: 25 % imbalance."""
    view = {p: ([1, 2], PartitionState(1 if p else 2, 1, (1, 2), 1)) for p in range(4)}
    assert imbalanced(view, {1, 2}, 10) == [0]
    assert imbalanced(view, {1, 2}, 25) == [], "at the threshold nothing moves"
    assert imbalanced(view, {2}, 10) == [], "a dead preferred replica cannot take over"


def test_added_partitions_continue_the_placement_rotation() -> None:
    first = place_replicas(2, 3, [1, 2, 3, 4], start=1)
    more = place_replicas(2, 3, [1, 2, 3, 4], start=1, first=2)
    assert first | more == place_replicas(4, 3, [1, 2, 3, 4], start=1)
    assert all(len(set(r)) == 3 for r in more.values())
