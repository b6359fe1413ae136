"""The group state machine and record helpers alone (pure: time is an argument)."""

from __future__ import annotations

import itertools

from logbroker.group import records
from logbroker.group.state import Group, GroupState, JoinArgs
from logbroker.protocol.errors import Err

ids = itertools.count(1)


def new_id(client: str) -> str:
    return f"{client}-{next(ids)}"


def args(member: str = "", *, client: str = "c", protocols: tuple[tuple[str, bytes], ...] = (("range", b"s"),),
         session: int = 6000, rebalance: int = 10000, known: bool = False) -> JoinArgs:
    return JoinArgs(member, client, "", session, rebalance, "consumer", protocols, known)


def stable_pair(now: int = 0) -> tuple[Group, str, str]:
    """A Stable group of two members, `a` the leader."""
    g = Group("g", initial_delay_ms=0)
    wa = g.join(now, args(client="a"), new_id)
    a = wa.result["member_id"] if wa.result else next(iter(g.members))
    g.sync(now, a, 1, {a: b"A"})
    g.written(now, 1, Err.NONE)
    wb = g.join(now, args(client="b"), new_id)  # starts generation 2: a must rejoin
    assert wb.result is None and g.state is GroupState.PREPARING
    wa2 = g.join(now, args(a), new_id)
    assert wa2.result and wb.result and wa2.result["generation_id"] == wb.result["generation_id"] == 2
    b = wb.result["member_id"]
    sa, sb = g.sync(now, a, 2, {a: b"A", b: b"B"}), g.sync(now, b, 2, {})
    assert g.write_wanted and sa.result is None and sb.result is None  # wait for the group record
    g.write_wanted = False
    g.written(now, 2, Err.NONE)
    assert sa.result == {"error_code": 0, "assignment": b"A"} and sb.result == {"error_code": 0, "assignment": b"B"}
    assert g.state is GroupState.STABLE
    return g, a, b


def test_member_id_required_then_a_generation_with_the_leader_seeing_subscriptions() -> None:
    g = Group("g", initial_delay_ms=0)
    w = g.join(0, args(known=True), new_id)
    assert w.result is not None and w.result["error_code"] == Err.MEMBER_ID_REQUIRED
    mid = w.result["member_id"]
    assert g.members == {} and mid in g.pending
    w2 = g.join(1, args(mid, known=True), new_id)
    assert w2.result == {"error_code": 0, "generation_id": 1, "protocol_name": "range", "leader": mid,
                         "member_id": mid, "members": [{"member_id": mid, "group_instance_id": None, "metadata": b"s"}]}
    assert g.state is GroupState.COMPLETING


def test_an_unused_member_id_expires_and_does_not_hold_the_rebalance() -> None:
    g, a, b = stable_pair()
    w = g.join(0, args(known=True, session=6000), new_id)
    pending = w.result["member_id"] if w.result else ""
    assert g.state is GroupState.STABLE and pending in g.pending  # a handed-out id alone changes nothing
    g.tick(6000)
    assert pending not in g.pending


def test_initial_delay_holds_the_first_generation() -> None:
    g = Group("g", initial_delay_ms=3000)
    w = g.join(0, args(), new_id)
    g.tick(2999)
    assert w.result is None
    g.tick(3000)
    assert w.result is not None and w.result["generation_id"] == 1


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    g, a, b = stable_pair()
    wb = g.join(100, args(b, protocols=(("roundrobin", b"x"), ("range", b"s"))), new_id)  # new protocols
    assert g.state is GroupState.PREPARING and wb.result is None
    assert g.heartbeat(5000, a, 2) == Err.REBALANCE_IN_PROGRESS  # alive, but it does not rejoin
    g.tick(100 + 9999)
    assert wb.result is None and a in g.members
    g.tick(100 + 10000)
    assert a not in g.members and wb.result is not None and wb.result["generation_id"] == 3
    assert wb.result["leader"] == b and wb.result["protocol_name"] == "roundrobin"


def test_protocol_chosen_by_vote_among_those_every_member_supports() -> None:
    g = Group("g", initial_delay_ms=0)
    wa = g.join(0, args(client="a", protocols=(("roundrobin", b""), ("range", b""))), new_id)
    assert wa.result is not None
    refused = g.join(0, args(client="z", protocols=(("sticky", b""),)), new_id)
    assert refused.result is not None and refused.result["error_code"] == Err.INCONSISTENT_GROUP_PROTOCOL
    g.join(0, args(client="b", protocols=(("range", b""), ("roundrobin", b""))), new_id)
    a = wa.result["member_id"]
    g.join(0, args(a, protocols=(("range", b""), ("roundrobin", b""))), new_id)
    assert g.protocol == "range"


def test_session_timeout_expires_a_silent_member_and_the_last_one_empties_the_group() -> None:
    g, a, b = stable_pair()
    assert g.heartbeat(5000, a, 2) == Err.NONE
    g.tick(6000)  # b never heartbeat after its sync at 0
    assert b not in g.members and g.state is GroupState.PREPARING
    assert g.heartbeat(6001, a, 2) == Err.REBALANCE_IN_PROGRESS
    assert g.heartbeat(6001, b, 2) == Err.UNKNOWN_MEMBER_ID
    assert g.heartbeat(6001, a, 1) == Err.ILLEGAL_GENERATION
    g.tick(20000)  # a does not rejoin either: rebalance timeout, no member left
    assert g.state is GroupState.EMPTY and g.members == {} and g.generation == 3 and g.write_wanted


def test_leave_starts_a_rebalance_and_a_failed_group_write_does_too() -> None:
    g, a, b = stable_pair()
    assert g.leave(0, b) == Err.NONE and g.state is GroupState.PREPARING
    w = g.join(0, args(a), new_id)
    assert w.result is not None and w.result["generation_id"] == 3 and w.result["members"] == [
        {"member_id": a, "group_instance_id": None, "metadata": b"s"}]
    s = g.sync(0, a, 3, {a: b"all"})
    g.written(0, 3, Err.NOT_COORDINATOR)
    assert s.result == {"error_code": int(Err.NOT_COORDINATOR)} and g.state is GroupState.PREPARING


def test_commit_rules() -> None:
    g = Group("g", initial_delay_ms=0)
    assert g.may_commit(0, "", -1) == Err.NONE  # no members: a commit without a generation
    g2, a, b = stable_pair()
    assert g2.may_commit(0, "", -1) == Err.UNKNOWN_MEMBER_ID
    assert g2.may_commit(0, a, 1) == Err.ILLEGAL_GENERATION
    assert g2.may_commit(0, a, 2) == Err.NONE
    g2.join(0, args(b, protocols=(("x", b""), ("range", b"s"))), new_id)
    g2.join(0, args(a), new_id)
    assert g2.state is GroupState.COMPLETING and g2.may_commit(0, a, 3) == Err.REBALANCE_IN_PROGRESS
    # a commit of the generation before, made while the new one completes: ILLEGAL_GENERATION, as Kafka
    assert g2.may_commit(0, a, 2) == Err.ILLEGAL_GENERATION
    assert g2.may_commit(0, "gone", 3) == Err.UNKNOWN_MEMBER_ID


def test_snapshot_restores_a_stable_group() -> None:
    g, a, b = stable_pair()
    r = Group.restore("g", g.snapshot(), 500, 0)
    assert r.state is GroupState.STABLE and r.generation == 2 and r.leader == a
    assert {m: r.members[m].assignment for m in r.members} == {a: b"A", b: b"B"}
    assert r.heartbeat(600, b, 2) == Err.NONE and r.members[b].heartbeat_deadline_ms == 6600


def test_partition_follows_javas_string_hash() -> None:
    assert records.java_string_hash("hello") == 99162322
    assert records.partition_for("hello", 50) == 22
    assert records.java_string_hash("polygenelubricants") == -(2**31)  # abs() of it is taken as 0
    assert records.partition_for("polygenelubricants", 50) == 0
    k, v = records.offset_record(records.OffsetKey("g", "t", 3), records.OffsetValue(7, 2, "m", 1))
    assert records.decode(k, v) == (records.OffsetKey("g", "t", 3), records.OffsetValue(7, 2, "m", 1))
