"""The group coordinator inside a real `BrokerCore`, sans-IO: requests built with kafka-python's
classes, time moved by hand (`ManualClock`, `tick()`), no sockets and no threads — the shape a
deterministic simulator drives it in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from logbroker.config import DEFAULTS, from_mapping
from logbroker.core.broker import BrokerCore, Reply
from logbroker.core.clock import ManualClock
from logbroker.protocol.apis import APIS, make_message
from logbroker.protocol.errors import Err

G = "grp"


def make_core(path: Path, clock: ManualClock) -> BrokerCore:
    cfg = from_mapping({**DEFAULTS, "log.dirs": str(path), "broker.id": "1", "offsets.topic.num.partitions": "3"})
    c = BrokerCore(cfg, clock)
    c.load_partitions()
    c.replication.start()  # type: ignore[attr-defined]
    return c


def call(core: BrokerCore, key: int, version: int, body: dict[str, Any]) -> Reply:
    req = make_message(APIS[key].request, version, body)
    req.with_header(correlation_id=1, client_id="sim")
    return core.handle(key, version, req)


def answer(reply: Reply) -> dict[str, Any] | None:
    """The response body, or None while it waits."""
    if reply.deferred is None:
        return reply.body
    return reply.deferred.complete(False) if reply.deferred.done else None


def join(core: BrokerCore, member: str) -> Reply:
    return call(core, 11, 4, {"group_id": G, "session_timeout_ms": 6000, "rebalance_timeout_ms": 10000,
                              "member_id": member, "protocol_type": "consumer",
                              "protocols": [{"name": "range", "metadata": b"sub"}]})


def create_topic(core: BrokerCore, name: str, partitions: int) -> None:
    made = answer(call(core, 19, 4, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                                 "assignments": [], "configs": []}],
                                     "timeout_ms": 1000, "validate_only": False}))
    assert made is not None and made["topics"][0]["error_code"] == 0


def commit(core: BrokerCore, generation: int, member: str, topic: str, partition: int, offset: int) -> int:
    """OffsetCommit v6 of one partition: its error code."""
    got = answer(call(core, 8, 6, {"group_id": G, "generation_id_or_member_epoch": generation, "member_id": member,
                                   "topics": [{"name": topic, "partitions": [
                                       {"partition_index": partition, "committed_offset": offset,
                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]}))
    assert got is not None
    return int(got["topics"][0]["partitions"][0]["error_code"])


def describe(core: BrokerCore) -> Any:
    body = answer(call(core, 15, 4, {"groups": [G]}))
    assert body is not None
    return body["groups"][0]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


def test_a_generation_commits_expires_and_survives_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    core = make_core(tmp_path, clock)
    found = answer(call(core, 10, 2, {"key": G, "key_type": 0}))
    assert found is not None and found["error_code"] == 0 and found["node_id"] == 1
    first = answer(join(core, ""))
    assert first is not None and first["error_code"] == Err.MEMBER_ID_REQUIRED
    member = first["member_id"]
    waiting = join(core, member)
    assert answer(waiting) is None  # group.initial.rebalance.delay.ms (3000) holds the first generation
    clock.advance(2999)
    core.tick()
    assert answer(waiting) is None
    clock.advance(1)
    core.tick()
    joined = answer(waiting)
    assert joined is not None and joined["generation_id"] == 1 and joined["leader"] == member
    synced = answer(call(core, 14, 2, {"group_id": G, "generation_id": 1, "member_id": member,
                                       "assignments": [{"member_id": member, "assignment": b"all"}]}))
    assert synced == {"throttle_time_ms": 0, "error_code": 0, "assignment": b"all"}
    create_topic(core, "t", 2)
    committed = answer(call(core, 8, 6, {"group_id": G, "generation_id_or_member_epoch": 1, "member_id": member,
                                         "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                                                  "committed_offset": 42,
                                                                                  "committed_leader_epoch": 3,
                                                                                  "committed_metadata": "m"}]}]}))
    assert committed is not None and committed["topics"][0]["partitions"][0]["error_code"] == 0
    stale = answer(call(core, 12, 2, {"group_id": G, "generation_id": 0, "member_id": member}))
    assert stale is not None and stale["error_code"] == Err.ILLEGAL_GENERATION
    d = describe(core)
    assert (d["group_state"], [m["client_id"] for m in d["members"]]) == ("Stable", ["sim"])
    clock.advance(6000)  # no heartbeat for a whole session
    core.tick()
    assert describe(core)["group_state"] == "Empty" and describe(core)["members"] == []
    core.close()

    again = make_core(tmp_path, clock)  # a restart: the partition's records are all there is
    fetched = answer(call(again, 9, 7, {"group_id": G, "topics": [{"name": "t", "partition_indexes": [0, 1]}],
                                        "require_stable": False}))
    assert fetched is not None
    assert [(p["partition_index"], p["committed_offset"], p["committed_leader_epoch"], p["metadata"])
            for p in fetched["topics"][0]["partitions"]] == [(0, 42, 3, "m"), (1, -1, -1, "")]
    gone = answer(call(again, 12, 2, {"group_id": G, "generation_id": 1, "member_id": member}))
    assert gone is not None and gone["error_code"] == Err.UNKNOWN_MEMBER_ID  # the Empty record came last
    again.close()


def test_requests_for_a_group_led_elsewhere_are_not_coordinator(tmp_path: Path, clock: ManualClock) -> None:
    core = make_core(tmp_path, clock)
    got = answer(join(core, ""))  # no __consumer_offsets yet: nothing here coordinates
    assert got is not None and got["error_code"] == Err.NOT_COORDINATOR
    fetched = answer(call(core, 9, 7, {"group_id": G, "topics": None, "require_stable": False}))
    assert fetched is not None and fetched["error_code"] == Err.NOT_COORDINATOR
    core.close()


def test_offsets_of_a_topic_or_partition_that_does_not_exist_are_refused(tmp_path: Path, clock: ManualClock) -> None:
    """As Kafka (librdkafka's 0030_offset_commit checks it): UNKNOWN_TOPIC_OR_PARTITION, nothing stored."""
    core = make_core(tmp_path, clock)
    found = answer(call(core, 10, 2, {"key": G, "key_type": 0}))
    assert found is not None and found["error_code"] == 0
    create_topic(core, "real", 1)
    assert commit(core, -1, "", "nowhere", 0, 123) == Err.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(core, -1, "", "real", 1, 456) == Err.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(core, -1, "", "real", 0, 7) == Err.NONE
    fetched = answer(call(core, 9, 7, {"group_id": G, "topics": None, "require_stable": False}))
    assert fetched is not None
    assert [(t["name"], [(p["partition_index"], p["committed_offset"]) for p in t["partitions"]])
            for t in fetched["topics"]] == [("real", [(0, 7)])]
    core.close()


def bump_epoch(core: BrokerCore, *, foreign: list[tuple[bytes, bytes]] | None = None) -> None:
    """What the controller does to the group's partition when a follower dies (the ISR shrinks, the
    leader epoch goes up, the leader stays: `ReplicaManager.become_leader`); with `foreign` records,
    as if another broker led at the epoch in between and wrote them before this one led again."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from logbroker.core.partition import TopicPartition
    from logbroker.group.records import OFFSETS_TOPIC, partition_for

    p = core.partitions[TopicPartition(OFFSETS_TOPIC, partition_for(G, 3))]
    if foreign:
        p.leader_epoch += 1
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
        for i, (k, v) in enumerate(foreign):
            b.append(i, timestamp=0, key=k, value=v, headers=[])
        p.log.append_as_leader(bytes(b.build()), p.leader_epoch)
    p.leader_epoch += 1
    p.log.epochs.assign(p.leader_epoch, p.leo)


def test_a_new_leader_epoch_of_the_same_leader_keeps_pending_rebalances_and_commits(
        tmp_path: Path, clock: ManualClock) -> None:
    """When any follower of the group's partition dies, the controller shrinks its ISR with a new
    leader epoch; the coordinator leads on. It keeps its groups as Kafka does: a member waiting for
    its generation is not told NOT_COORDINATOR, and a commit waiting for the ISR is acknowledged."""
    from logbroker.core.partition import TopicPartition
    from logbroker.group.records import OFFSETS_TOPIC, partition_for

    core = make_core(tmp_path, clock)
    assert answer(call(core, 10, 2, {"key": G, "key_type": 0}))["error_code"] == 0  # type: ignore[index]
    create_topic(core, "t", 1)
    member = answer(join(core, ""))["member_id"]  # type: ignore[index]
    waiting = join(core, member)
    bump_epoch(core)
    core.tick()
    assert answer(waiting) is None, "the pending rebalance was thrown away"
    clock.advance(3000)
    core.tick()
    joined = answer(waiting)
    assert joined is not None and joined["error_code"] == 0 and joined["generation_id"] == 1
    synced = answer(call(core, 14, 2, {"group_id": G, "generation_id": 1, "member_id": member,
                                       "assignments": [{"member_id": member, "assignment": b"all"}]}))
    assert synced is not None and synced["error_code"] == 0
    p = core.partitions[TopicPartition(OFFSETS_TOPIC, partition_for(G, 3))]
    p.isr = [1, 2]  # a follower that has not fetched yet holds the HW back
    p.follower_leo[2] = p.hw
    pending = call(core, 8, 6, {"group_id": G, "generation_id_or_member_epoch": 1, "member_id": member,
                                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                                         "committed_leader_epoch": -1,
                                                                         "committed_metadata": ""}]}]})
    assert answer(pending) is None
    bump_epoch(core)
    p.follower_leo[2] = p.leo
    p.maybe_advance_hw()
    core.purgatory.check([p.tp])
    got = answer(pending)
    assert got is not None and got["topics"][0]["partitions"][0]["error_code"] == Err.NONE
    core.close()


def test_records_another_leader_wrote_in_between_are_read_again(tmp_path: Path, clock: ManualClock) -> None:
    from logbroker.group.records import OffsetKey, OffsetValue, offset_record

    core = make_core(tmp_path, clock)
    assert answer(call(core, 10, 2, {"key": G, "key_type": 0}))["error_code"] == 0  # type: ignore[index]
    create_topic(core, "t", 1)
    assert commit(core, -1, "", "t", 0, 7) == Err.NONE
    bump_epoch(core, foreign=[offset_record(OffsetKey(G, "t", 0), OffsetValue(9, -1, "", 0))])
    fetched = answer(call(core, 9, 7, {"group_id": G, "topics": None, "require_stable": False}))
    assert fetched is not None and fetched["topics"][0]["partitions"][0]["committed_offset"] == 9
    core.close()
