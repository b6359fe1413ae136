"""Consumer groups on three brokers: the coordinator's broker dies and the group carries on from
its committed offsets, which never go backwards (they are acks=all records in __consumer_offsets)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from brokerlib import BrokerProc
from conftest import make_cluster
from test_repl_failover import create, produce, wait_for
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper
quiet = logging.getLogger("quiet-repl-groups")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
GROUP = "g-failover"


def consumer(cluster: list[BrokerProc], **extra: object):  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster if b.alive()), "group.id": GROUP,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "logger": quiet, **extra})


def coordinator(cluster: list[BrokerProc]) -> int:
    """The group's coordinator as a client finds it; -1 while there is none. Right after the
    coordinator's broker dies, FindCoordinator still names it until the controller moves its
    `__consumer_offsets` partition, and the admin request retries against the dead broker until
    its own timeout: that is "none at the moment" too."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in cluster if b.alive()), "logger": quiet})
    try:
        return int(a.describe_consumer_groups([GROUP])[GROUP].result(10).coordinator.id)
    except (KafkaException, TimeoutError):
        return -1


def test_group_resumes_from_committed_offsets_after_the_coordinator_dies(tmp_path: Path,
                                                                           zookeeper: LocalZooKeeper) -> None:
    from confluent_kafka import KafkaException, TopicPartition

    cluster = make_cluster(tmp_path, zookeeper, extra=("offsets.topic.num.partitions=3",
                                                      "group.initial.rebalance.delay.ms=0"))
    try:
        create(cluster, "events")
        acked, errors = produce(cluster, "events", range(300))
        assert errors == [] and len(acked) == 300
        watcher = consumer(cluster)  # never joins: asks the coordinator for the committed offset only
        seen: list[int] = []  # committed offsets as observed, in order

        def observe() -> None:
            try:
                (tp,) = watcher.committed([TopicPartition("events", 0)], timeout=2)
            except KafkaException:
                return  # no coordinator at the moment
            seen.append(tp.offset)  # none committed (OFFSET_INVALID, -1001) counts as going backwards

        c = consumer(cluster)
        c.subscribe(["events"])
        nxt = 0  # the next value (= offset) this group has not processed
        acknowledged: list[int] = []

        def consume_to(target: int) -> None:
            nonlocal nxt
            deadline = time.monotonic() + 40
            while nxt < target:
                assert time.monotonic() < deadline, f"stuck at {nxt}"
                m = c.poll(0.2)
                if m is None or m.error() is not None:
                    continue
                v = int(m.value())
                assert v <= nxt, f"skipped from {nxt} to {v}"  # a re-read after a rebalance is allowed
                if v < nxt:
                    continue
                nxt = v + 1
                if nxt % 20 == 0:
                    while True:  # commit until acknowledged; the coordinator may be moving
                        try:
                            c.commit(offsets=[TopicPartition("events", 0, nxt)], asynchronous=False)
                            break
                        except KafkaException:
                            assert time.monotonic() < deadline, "no commit acknowledged"
                            time.sleep(0.2)
                    acknowledged.append(nxt)
                    observe()

        consume_to(100)
        coord = coordinator(cluster)
        assert coord > 0
        victim = cluster[coord - 1]
        victim.kill()
        wait_for(lambda: coordinator(cluster) not in (coord, -1), 60, what="a new coordinator")
        observe()
        assert seen[-1] == 100, f"the new coordinator does not have the last commit: {seen}"
        consume_to(200)
        observe()
        c.close()
        assert seen == sorted(seen), f"a committed offset went backwards: {seen}"
        assert seen[-1] == 200 and acknowledged[-1] == 200
        # a new member starts exactly where the group committed
        d = consumer(cluster)
        d.subscribe(["events"])
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            m = d.poll(0.2)
            if m is not None and m.error() is None:
                first = int(m.value())
        d.close()
        watcher.close()
        assert first == 200
    finally:
        for b in cluster:
            b.kill()


def test_static_members_keep_their_instance_mapping_across_a_coordinator_failover(
        tmp_path: Path, zookeeper: LocalZooKeeper) -> None:
    """The group record carries each member's group.instance.id: after the coordinator's broker dies,
    the new coordinator still knows both static members, and one that restarts there gets its own
    partitions back with no rebalance of the other."""
    from confluent_kafka.admin import AdminClient
    from test_groups import StaticMember, until

    cluster = make_cluster(tmp_path, zookeeper, extra=("offsets.topic.num.partitions=3",
                                                      "group.initial.rebalance.delay.ms=0"))
    members: list[StaticMember] = []
    try:
        from confluent_kafka.admin import NewTopic
        from test_repl_failover import admin as admin_of

        client = admin_of(cluster)
        wait_for(lambda: len(client.list_topics(timeout=10).brokers) == 3, what="all brokers registered")
        for f in client.create_topics([NewTopic("static", 4, 3)]).values():
            f.result(15)
        boot = ",".join(b.bootstrap for b in cluster)
        a = StaticMember(boot, GROUP, "ia", "static")
        b = StaticMember(boot, GROUP, "ib", "static")
        members += [a, b]

        def step() -> None:
            for m in members:
                m.poll()

        until(lambda: len(a.parts()) == 2 and len(b.parts()) == 2, 40, "a split between the static members", step)
        a_seen, b_parts = a.rebalances, b.parts()
        coord = coordinator(cluster)
        assert coord > 0
        cluster[coord - 1].kill()
        wait_for(lambda: coordinator(cluster) not in (coord, -1), 60, what="a new coordinator")
        alive = ",".join(x.bootstrap for x in cluster if x.alive())
        admin = AdminClient({"bootstrap.servers": alive, "logger": quiet})
        desc = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        assert sorted(m.group_instance_id for m in desc.members) == ["ia", "ib"]
        b.c.close()  # no LeaveGroup: static
        members.remove(b)
        b2 = StaticMember(alive, GROUP, "ib", "static")
        members.append(b2)
        until(lambda: len(b2.parts()) == 2, 40, "the restarted member's assignment", step)
        assert b2.parts() == b_parts and a.rebalances == a_seen
    finally:
        for m in members:
            m.c.close()
        for x in cluster:
            x.kill()
