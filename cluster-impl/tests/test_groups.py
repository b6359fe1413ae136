"""Consumer groups on a standalone broker, through real clients: subscribe, share, rebalance, resume.

The coordinator's state machine and its `__consumer_offsets` writes are in `logbroker/group/`;
failover of the coordinator is in `replication/test_repl_groups.py`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from brokerlib import BrokerProc

quiet = logging.getLogger("quiet-groups")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
GROUP_OPTS = ["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=5"]


@pytest.fixture
def gbroker(tmp_path: Path) -> Iterator[BrokerProc]:
    b = BrokerProc(tmp_path / "data", overrides=GROUP_OPTS).start()
    yield b
    b.kill()


def create(bootstrap: str, topic: str, partitions: int, values: int) -> None:
    """A topic with `values` records 0..values-1, spread round-robin over its partitions."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet})
    for i in range(values):
        p.produce(topic, str(i).encode(), partition=i % partitions)
    assert p.flush(15) == 0


def confluent(bootstrap: str, group: str, **extra: object):  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     "logger": quiet, **extra})


def until(pred: Callable[[], bool], timeout: float, what: str, step: Callable[[], None] = lambda: None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        step()
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def drain(c, got: list[int], want: int, timeout: float = 20) -> None:  # type: ignore[no-untyped-def]
    def step() -> None:
        m = c.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(int(m.value()))

    until(lambda: len(got) >= want, timeout, f"{want} records (have {len(got)})", step)


def test_confluent_group_consumer_subscribes_consumes_and_commits(gbroker: BrokerProc) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    create(gbroker.bootstrap, "sub", 3, 300)
    c = confluent(gbroker.bootstrap, "g-sub")
    c.subscribe(["sub"])
    got: list[int] = []
    drain(c, got, 300)
    assert sorted(got) == list(range(300))
    assert sorted(tp.partition for tp in c.assignment()) == [0, 1, 2]
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition("sub", i) for i in range(3)], 10)
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 100), (1, 100), (2, 100)]
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap, "logger": quiet})
    listed = admin.list_consumer_groups().result(10)
    assert [g.group_id for g in listed.valid] == ["g-sub"]
    (desc,) = admin.describe_consumer_groups(["g-sub"])["g-sub"].result(10),
    assert str(desc.state).endswith("STABLE") and len(desc.members) == 1
    assert desc.members[0].host == "/127.0.0.1" and desc.members[0].client_id == "rdkafka"
    assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == [0, 1, 2]
    c.close()  # LeaveGroup: the group empties at once
    until(lambda: str(admin.describe_consumer_groups(["g-sub"])["g-sub"].result(10).state).endswith("EMPTY"),
          10, "an empty group after close")


def test_two_clients_share_a_topic_and_rebalance_when_one_leaves(gbroker: BrokerProc) -> None:
    """A confluent-kafka and a kafka-python member of one group split the partitions between them;
    when kafka-python leaves, confluent-kafka is given all of them."""
    from kafka import KafkaConsumer

    create(gbroker.bootstrap, "shared", 4, 400)
    c = confluent(gbroker.bootstrap, "g-two", **{"partition.assignment.strategy": "range"})
    c.subscribe(["shared"])
    k = KafkaConsumer("shared", bootstrap_servers=gbroker.bootstrap, group_id="g-two", auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    seen_c: list[int] = []
    seen_k: list[int] = []

    def step() -> None:
        m = c.poll(0.05)
        if m is not None and m.error() is None:
            seen_c.append(int(m.value()))
        for msgs in k.poll(50).values():
            seen_k.extend(int(r.value) for r in msgs)

    def split() -> bool:
        mine = {tp.partition for tp in c.assignment()}
        theirs = {tp.partition for tp in k.assignment()}
        return bool(mine) and bool(theirs) and not mine & theirs and mine | theirs == {0, 1, 2, 3}

    try:
        until(split, 30, "both members to own partitions", step)
        k_parts = {tp.partition for tp in k.assignment()}
        until(lambda: len(seen_k) >= 100 * len(k_parts), 20, "kafka-python to read its partitions", step)
        assert {v % 4 for v in seen_k} <= k_parts | {v % 4 for v in seen_c}
        from kafka.structs import OffsetAndMetadata

        # OffsetCommit with kafka-python's generation and member id; offset 50 of each of its
        # partitions (it has read them all), so whoever takes them over must start in the middle
        k.commit({tp: OffsetAndMetadata(50, "", -1) for tp in k.assignment()})
        positions = {tp.partition: 50 for tp in k.assignment()}
    finally:
        k.close()  # LeaveGroup
    until(lambda: {tp.partition for tp in c.assignment()} == {0, 1, 2, 3}, 20, "confluent to own every partition",
          lambda: c.poll(0.05))
    from confluent_kafka import TopicPartition

    got = {tp.partition: tp.offset for tp in c.committed([TopicPartition("shared", i) for i in positions], 10)}
    assert got == positions
    first: dict[int, int] = {}  # confluent's first record of each partition kafka-python had: offset

    def step2() -> None:
        m = c.poll(0.05)
        if m is not None and m.error() is None and m.partition() in positions:
            first.setdefault(m.partition(), m.offset())

    until(lambda: set(positions) <= set(first), 20, "confluent to read on where kafka-python committed", step2)
    assert first == positions
    c.close()


def test_commit_restart_and_resume_from_the_committed_offset(tmp_path: Path) -> None:
    """Offsets committed before a kill -9 of the broker are where the group resumes afterwards."""
    b = BrokerProc(tmp_path / "data", overrides=GROUP_OPTS).start()
    try:
        create(b.bootstrap, "resume", 1, 100)
        c = confluent(b.bootstrap, "g-resume")
        c.subscribe(["resume"])
        got: list[int] = []
        drain(c, got, 40)
        first = got[:40]
        from confluent_kafka import TopicPartition

        c.commit(offsets=[TopicPartition("resume", 0, 40)], asynchronous=False)
        c.close()
        b.kill()
        b.start()
        c = confluent(b.bootstrap, "g-resume")
        c.subscribe(["resume"])
        rest: list[int] = []
        drain(c, rest, 60)
        c.close()
        assert first == list(range(40)) and rest[:60] == list(range(40, 100))
    finally:
        b.kill()
    # the replica dump leaves the coordinator's topic out unless asked (a run's checks read every file)
    from logbroker.dump import main as dump

    assert dump(["--log-dirs", str(b.data), "--out", str(tmp_path / "plain")]) == 0
    assert sorted(f.name for f in (tmp_path / "plain").iterdir()) == ["resume-0.jsonl"]
    assert dump(["--log-dirs", str(b.data), "--out", str(tmp_path / "all"), "--internal"]) == 0
    assert len(list((tmp_path / "all").glob("__consumer_offsets-*.jsonl"))) == 5


MEMBER_SCRIPT = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "g-expire", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500, "enable.auto.commit": False})
c.subscribe(["expire"])
while not c.assignment():
    c.poll(0.1)
print("assigned", flush=True)
while True:
    c.poll(0.1)
"""


def test_a_member_killed_without_leaving_expires_after_its_session_timeout(gbroker: BrokerProc) -> None:
    import signal
    import subprocess
    import sys

    create(gbroker.bootstrap, "expire", 2, 0)
    c = confluent(gbroker.bootstrap, "g-expire")
    c.subscribe(["expire"])
    until(lambda: bool(c.assignment()), 15, "the first member's assignment", lambda: c.poll(0.05))
    other = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, gbroker.bootstrap], stdout=subprocess.PIPE)
    try:
        assert other.stdout is not None
        until(lambda: len(c.assignment()) == 1, 20, "a split of the two partitions", lambda: c.poll(0.05))
        assert other.stdout.readline() == b"assigned\n"
        other.send_signal(signal.SIGKILL)  # no LeaveGroup: only its session timeout (6 s) removes it
        other.wait(5)
        killed = time.monotonic()
        until(lambda: len(c.assignment()) == 2, 20, "both partitions back", lambda: c.poll(0.05))
        assert time.monotonic() - killed > 4  # not before the session could have expired
    finally:
        other.kill()
        c.close()


class StaticMember:
    """A confluent-kafka consumer with `group.instance.id` that counts its rebalance callbacks and
    keeps the errors its error callback saw (a fenced instance gets a fatal FENCED_INSTANCE_ID)."""

    def __init__(self, bootstrap: str, group: str, instance: str, topic: str) -> None:
        self.rebalances = 0
        self.errors: list[Any] = []
        self.c = confluent(bootstrap, group, **{"group.instance.id": instance, "client.id": instance,
                                                "error_cb": self.errors.append})
        self.c.subscribe([topic], on_assign=self._count, on_revoke=self._count)

    def _count(self, _c: object, _parts: object) -> None:
        self.rebalances += 1

    def parts(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def poll(self) -> None:
        m = self.c.poll(0.05)
        if m is not None and m.error() is not None:
            self.errors.append(m.error())


def leave_by_instance(bootstrap: str, group: str, *instances: str) -> list[int]:
    """LeaveGroup v3 naming static members by instance id only (as Kafka's admin removal does)."""
    from logbroker.protocol.apis import APIS, make_message
    from rawclient import RawClient

    raw = RawClient(bootstrap)
    try:
        req = make_message(APIS[13].request, 3, {"group_id": group, "members": [
            {"member_id": "", "group_instance_id": i} for i in instances]})
        resp = raw.request(req, APIS[13].response)
    finally:
        raw.close()
    assert resp.error_code == 0
    return [m.error_code for m in resp.members]


def test_static_member_restarts_without_a_rebalance_is_fenced_and_is_removed_by_instance(
        gbroker: BrokerProc) -> None:
    """KIP-345 on one broker: a static member that restarts within its session timeout gets its
    partitions back and the other member sees no rebalance; a second process with the same instance
    id fences the first (fatal FENCED_INSTANCE_ID); LeaveGroup by instance id removes a member at once."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    create(gbroker.bootstrap, "static", 4, 0)
    a = StaticMember(gbroker.bootstrap, "g-static", "ia", "static")
    b = StaticMember(gbroker.bootstrap, "g-static", "ib", "static")
    members = [a, b]

    def step() -> None:
        for m in members:
            m.poll()

    until(lambda: len(a.parts()) == 2 and len(b.parts()) == 2, 30, "a split between the static members", step)
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap, "logger": quiet})
    desc = admin.describe_consumer_groups(["g-static"])["g-static"].result(10)
    assert sorted(m.group_instance_id for m in desc.members) == ["ia", "ib"]
    a_seen, b_parts = a.rebalances, b.parts()
    b.c.close()  # a static member's close does not leave the group
    members.remove(b)
    b2 = StaticMember(gbroker.bootstrap, "g-static", "ib", "static")
    members.append(b2)
    until(lambda: len(b2.parts()) == 2, 15, "the restarted member's assignment", step)
    assert b2.parts() == b_parts and a.rebalances == a_seen  # same partitions, nobody else rebalanced
    # a second process claiming "ib" fences the running one
    b3 = StaticMember(gbroker.bootstrap, "g-static", "ib", "static")
    members.append(b3)
    until(lambda: any(e.code() == KafkaError._FATAL for e in b2.errors), 20, "a fatal error for the older instance",
          step)
    assert "fenced" in str(b2.errors[-1]), b2.errors  # librdkafka's text for FENCED_INSTANCE_ID
    members.remove(b2)
    b2.c.close()
    # administrative removal: "ia" stops without leaving and is removed by instance id
    assert leave_by_instance(gbroker.bootstrap, "g-static", "nobody") == [25]  # UNKNOWN_MEMBER_ID
    a.c.close()
    members.remove(a)
    t0 = time.monotonic()
    assert leave_by_instance(gbroker.bootstrap, "g-static", "ia") == [0]
    until(lambda: len(b3.parts()) == 4, 15, "all partitions for the remaining member", step)
    assert time.monotonic() - t0 < 6  # before "ia"'s session timeout could have removed it
    b3.c.close()
