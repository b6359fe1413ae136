"""Static members (KIP-345, `group.instance.id`) in the group state machine alone (time is an argument)."""

from __future__ import annotations

import itertools

from logbroker.group.state import Group, GroupState, JoinArgs, Waiter
from logbroker.protocol.errors import Err

ids = itertools.count(1)


def new_id(client: str) -> str:
    return f"{client}-{next(ids)}"


def sargs(member: str = "", instance: str | None = "i", *, protocols: tuple[tuple[str, bytes], ...] = (
        ("range", b"s"),), session: int = 6000, rebalance: int = 10000) -> JoinArgs:
    return JoinArgs(member, "c", "", session, rebalance, "consumer", protocols, True, instance)


def joined(w: Waiter) -> dict[str, object]:
    assert w.result is not None and w.result["error_code"] == 0, w.result
    return w.result


def stable_static_pair() -> tuple[Group, str, str]:
    """A Stable group of static members `a` (instance ia, leader) and `b` (instance ib), generation 1,
    assignments A and B."""
    g = Group("g", initial_delay_ms=0)
    wa = g.join(0, sargs(instance="ia"), new_id)  # no MEMBER_ID_REQUIRED round for a static member
    a = str(joined(wa)["member_id"])
    g.sync(0, a, 1, {a: b"A"})
    g.written(0, 1, Err.NONE)
    wb = g.join(0, sargs(instance="ib"), new_id)
    g.join(0, sargs(a, "ia"), new_id)
    b = str(joined(wb)["member_id"])
    g.sync(0, a, 2, {a: b"A", b: b"B"})
    g.sync(0, b, 2, {})
    g.write_wanted = False
    g.written(0, 2, Err.NONE)
    assert g.state is GroupState.STABLE and g.static == {"ia": a, "ib": b} and g.leader == a
    return g, a, b


def test_a_restarted_static_member_gets_its_assignment_back_without_a_rebalance() -> None:
    g, a, b = stable_static_pair()
    w = g.join(100, sargs(instance="ib"), new_id)  # b restarts: it knows no member id
    assert w.result is None and g.write_wanted  # answered once the group record with its new id is written
    b2 = g.static["ib"]
    assert b2 != b and b not in g.members and g.state is GroupState.STABLE and g.generation == 2
    g.write_wanted = False
    g.written(100, 2, Err.NONE, (b2,))
    assert joined(w) == {"error_code": 0, "generation_id": 2, "protocol_name": "range", "leader": a,
                         "member_id": b2, "members": []}
    assert g.sync(100, b2, 2, {}, "ib").result == {"error_code": 0, "assignment": b"B"}
    assert g.heartbeat(100, a, 2, "ia") == Err.NONE  # the other member saw nothing
    # the old incarnation is fenced everywhere
    assert g.heartbeat(100, b, 2, "ib") == Err.FENCED_INSTANCE_ID
    assert g.sync(100, b, 2, {}, "ib").result == {"error_code": int(Err.FENCED_INSTANCE_ID)}
    assert g.may_commit(100, b, 2, "ib") == Err.FENCED_INSTANCE_ID
    fenced = g.join(100, sargs(b, "ib"), new_id)
    assert fenced.result is not None and fenced.result["error_code"] == Err.FENCED_INSTANCE_ID


def test_the_restarted_leader_is_not_told_it_leads_and_a_failed_write_puts_the_old_id_back() -> None:
    g, a, b = stable_static_pair()
    w = g.join(0, sargs(instance="ia"), new_id)
    a2 = g.static["ia"]
    assert g.leader == a2
    g.written(0, 2, Err.NOT_COORDINATOR, (a2,))
    assert w.result is not None and w.result["error_code"] == Err.NOT_COORDINATOR
    assert g.static["ia"] == a and g.leader == a and a in g.members and a2 not in g.members
    w = g.join(0, sargs(instance="ia"), new_id)
    a3 = g.static["ia"]
    g.written(0, 2, Err.NONE, (a3,))
    assert joined(w)["leader"] == a and joined(w)["member_id"] == a3  # the old leader id: it does not assign


def test_new_protocols_make_a_static_rejoin_rebalance() -> None:
    g, a, b = stable_static_pair()
    g.join(0, sargs(instance="ib", protocols=(("roundrobin", b"x"), ("range", b"s"))), new_id)
    assert g.state is GroupState.STABLE  # range is still everyone's choice: no rebalance
    g2, a, b = stable_static_pair()
    g2.members[a].protocols = (("roundrobin", b""), ("range", b"s"))  # a would now vote roundrobin too
    g2.join(0, sargs(instance="ib", protocols=(("roundrobin", b"x"), ("range", b"s"))), new_id)
    assert g2.state is GroupState.PREPARING


def test_a_rebalance_keeps_an_absent_static_member_until_its_session_ends() -> None:
    g, a, b = stable_static_pair()
    wa = g.join(0, sargs(a, "ia", protocols=(("range", b"s2"),)), new_id)  # the leader rejoins: rebalance
    assert g.state is GroupState.PREPARING
    assert g.heartbeat(5000, b, 2, "ib") == Err.REBALANCE_IN_PROGRESS  # alive, but it does not rejoin
    g.tick(10000)  # rebalance timeout: b did not rejoin, but it is static
    res = joined(wa)
    assert res["generation_id"] == 3 and b in g.members
    assert {m["member_id"] for m in res["members"]} == {a, b}  # type: ignore[attr-defined]
    assert g.heartbeat(10001, b, 2, "ib") == Err.ILLEGAL_GENERATION  # it must rejoin to learn generation 3
    g.sync(10001, a, 3, {a: b"A", b: b"B"})
    g.written(10001, 3, Err.NONE)
    assert g.heartbeat(15000, a, 3, "ia") == Err.NONE
    g.tick(16001)  # b's session (6 s from the end of the join) is over
    assert b not in g.members and "ib" not in g.static and g.state is GroupState.PREPARING


def test_leave_by_instance_id() -> None:
    g, a, b = stable_static_pair()
    assert g.leave(0, "", "nobody") == Err.UNKNOWN_MEMBER_ID
    assert g.leave(0, "stale", "ib") == Err.FENCED_INSTANCE_ID
    assert g.leave(0, "", "ib") == Err.NONE
    assert b not in g.members and "ib" not in g.static and g.state is GroupState.PREPARING


def test_the_instance_mapping_survives_a_reload() -> None:
    g, a, b = stable_static_pair()
    snap = g.snapshot()
    r = Group.restore("g", snap, 500, 0)
    assert r.static == {"ia": a, "ib": b}
    w = r.join(600, sargs(instance="ib"), new_id)  # b restarts after the coordinator moved
    b2 = r.static["ib"]
    r.written(600, 2, Err.NONE, (b2,))
    assert joined(w)["generation_id"] == 2 and r.state is GroupState.STABLE
    assert r.sync(600, b2, 2, {}, "ib").result == {"error_code": 0, "assignment": b"B"}
    old = {k: v for k, v in snap.items() if k != "members"} | {
        "members": [{k: v for k, v in m.items() if k != "group_instance_id"} for m in snap["members"]]}
    assert Group.restore("g", old, 0, 0).static == {}  # a record from before static members


def test_an_unknown_instance_may_not_commit_and_sync_checks_the_member_before_the_protocol() -> None:
    """OffsetCommit names an instance the group does not know: UNKNOWN_MEMBER_ID, even with no
    generation on an empty group (Kafka validates a static member always). SyncGroup v5 from a
    member that is gone: UNKNOWN_MEMBER_ID (it rejoins), not INCONSISTENT_GROUP_PROTOCOL; a
    current member naming another protocol than the group's gets INCONSISTENT_GROUP_PROTOCOL."""
    g, a, b = stable_static_pair()
    assert g.may_commit(100, "nobody", -1, "iz") == Err.UNKNOWN_MEMBER_ID
    assert g.may_commit(100, a, 2, "ia") == Err.NONE
    gone = g.sync(100, "gone", 2, {}, None, "consumer", "roundrobin")
    assert gone.result == {"error_code": int(Err.UNKNOWN_MEMBER_ID)}
    wrong = g.sync(100, a, 2, {}, "ia", "consumer", "roundrobin")
    assert wrong.result == {"error_code": int(Err.INCONSISTENT_GROUP_PROTOCOL)}
    assert g.sync(100, a, 2, {}, "ia", "consumer", "range").result == {"error_code": 0, "assignment": b"A"}
