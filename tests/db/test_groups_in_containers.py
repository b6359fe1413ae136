"""Consumer groups on a 3-broker cluster in containers, through two real clients.

A librdkafka (confluent-kafka) and a kafka-python group consumer share a topic; when kafka-python
leaves, librdkafka is given its partitions and goes on from the offsets kafka-python committed; the
broker that coordinates the group is killed, and the group carries on with a new coordinator (the new
leader of its `__consumer_offsets` partition) from the offsets committed before; a new kafka-python
member joins after the failover and starts from them too. Every acknowledged commit is recorded and
the committed offsets, as the coordinator answers them, are sampled throughout: none goes backwards.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from harness.systems.logbroker.db import LogbrokerDB
from harness.systems.logbroker.settings import BrokerSettings
from kernel.db import Cluster
from tests.conftest import until

pytestmark = pytest.mark.docker
quiet = logging.getLogger("quiet-groups-containers")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
TOPIC, GROUP, PARTS = "shared", "g-real", 4


class Ledger:
    """What the members did: reads per partition in order, and every acknowledged commit in order."""

    def __init__(self) -> None:
        self.reads: dict[int, list[tuple[str, int, int]]] = {p: [] for p in range(PARTS)}  # (who, offset, value)
        self.commits: list[tuple[str, int, int]] = []  # (who, partition, offset)
        self.observed: list[dict[int, int]] = []  # committed offsets as the coordinator answered them

    def read(self, who: str, partition: int, offset: int, value: int) -> None:
        self.reads[partition].append((who, offset, value))

    def committed_now(self, p: int) -> int:
        return max((o for _, q, o in self.commits if q == p), default=0)


def _confluent_step(c: Any, ledger: Ledger) -> None:
    from confluent_kafka import KafkaException, TopicPartition

    msgs = [m for m in c.consume(100, 0.3) if m.error() is None]
    held = {tp.partition for tp in c.assignment()}
    nxt: dict[int, int] = {}
    for m in msgs:
        ledger.read("rdkafka", m.partition(), m.offset(), int(m.value()))
        nxt[m.partition()] = m.offset() + 1
    nxt = {p: o for p, o in nxt.items() if p in held}
    if nxt:
        try:
            done = c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in nxt.items()], asynchronous=False)
        except KafkaException:
            return  # refused (a rebalance) or unknown (the coordinator died): not acknowledged
        ledger.commits.extend(("rdkafka", tp.partition, tp.offset) for tp in done if tp.error is None)


def _kafka_python_step(k: Any, who: str, ledger: Ledger) -> None:
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    nxt: dict[Any, int] = {}
    for tp, msgs in k.poll(300, max_records=100).items():
        for r in msgs:
            ledger.read(who, tp.partition, r.offset, int(r.value))
            nxt[tp] = r.offset + 1
    nxt = {tp: o for tp, o in nxt.items() if tp in k.assignment()}
    if nxt:
        try:
            k.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in nxt.items()})
        except KafkaError:
            return
        ledger.commits.extend((who, tp.partition, o) for tp, o in nxt.items())



def test_real_clients_share_rebalance_and_resume_after_the_coordinator_dies(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer

    nodes = docker_cluster.nodes
    db = LogbrokerDB(BrokerSettings(partitions=PARTS, extra={"group.initial.rebalance.delay.ms": "0"})).attach(
        Cluster(nodes, {n.name: docker_cluster.remote(n.name) for n in nodes}))
    ledger = Ledger()
    members: list[Any] = []
    try:
        db.setup_all()
        db.create_topic(TOPIC, PARTS, 3)
        boot = db.bootstrap_servers()
        producer = Producer({"bootstrap.servers": boot, "acks": "all", "logger": quiet})
        sent = 0

        def produce(n: int) -> None:
            nonlocal sent
            errors: list[object] = []
            for v in range(sent, sent + n):
                producer.produce(TOPIC, str(v).encode(), partition=v % PARTS,
                                 on_delivery=lambda e, m: errors.append(e) if e else None)
            assert producer.flush(60) == 0 and errors == []
            sent += n

        observer = Consumer({"bootstrap.servers": boot, "group.id": GROUP, "logger": quiet})  # never joins
        admin = AdminClient({"bootstrap.servers": boot, "logger": quiet})

        def observe() -> None:
            from confluent_kafka import KafkaException

            try:
                got = observer.committed([TopicPartition(TOPIC, p) for p in range(PARTS)], 5)
            except KafkaException:
                return  # no coordinator at the moment
            ledger.observed.append({tp.partition: tp.offset for tp in got if tp.error is None and tp.offset >= 0})

        produce(400)
        c = Consumer({"bootstrap.servers": boot, "group.id": GROUP, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                      "partition.assignment.strategy": "range", "logger": quiet})
        members.append(c)
        c.subscribe([TOPIC])
        k = KafkaConsumer(TOPIC, bootstrap_servers=boot, group_id=GROUP, auto_offset_reset="earliest",
                          enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
        members.append(k)

        def both() -> None:
            _confluent_step(c, ledger)
            _kafka_python_step(k, "kafka-python", ledger)
            observe()

        def holds(m: Any) -> set[int]:
            return {tp.partition for tp in m.assignment()}

        until("the two clients to split the partitions",
              lambda: bool(holds(c)) and bool(holds(k)) and not holds(c) & holds(k) and
              holds(c) | holds(k) == set(range(PARTS)), both)
        k_parts = holds(k)
        until("kafka-python to read and commit half of its partitions",
              lambda: all(ledger.committed_now(p) >= 50 for p in k_parts), both)
        k.close()  # LeaveGroup
        members.remove(k)
        left_at = {p: ledger.committed_now(p) for p in k_parts}
        mark = {p: len(ledger.reads[p]) for p in range(PARTS)}
        produce(400)
        until("librdkafka to own every partition", lambda: holds(c) == set(range(PARTS)),
              lambda: (_confluent_step(c, ledger), observe()))
        until("librdkafka to read on in kafka-python's partitions",
              lambda: all(len(ledger.reads[p]) > mark[p] for p in k_parts),
              lambda: (_confluent_step(c, ledger), observe()))
        for p in k_parts:  # it took them over exactly where the group had committed them
            assert ledger.reads[p][mark[p]][:2] == ("rdkafka", left_at[p])

        coordinator = int(admin.describe_consumer_groups([GROUP])[GROUP].result(15).coordinator.id)
        victim = db.node_by_broker_id(coordinator)
        assert victim is not None
        before = {p: ledger.committed_now(p) for p in range(PARTS)}
        db.kill(victim)
        produce(400)
        until("librdkafka to commit again, through a new coordinator",
              lambda: all(ledger.committed_now(p) > before[p] for p in range(PARTS)),
              lambda: (_confluent_step(c, ledger), observe()), timeout=90)
        k2 = KafkaConsumer(TOPIC, bootstrap_servers=",".join(db.client_address(n) for n in nodes if n != victim),
                           group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False,
                           session_timeout_ms=6000, heartbeat_interval_ms=500)
        members.append(k2)

        def both2() -> None:
            _confluent_step(c, ledger)
            _kafka_python_step(k2, "kafka-python-2", ledger)
            observe()

        start = {p: ledger.committed_now(p) for p in range(PARTS)}
        until("a new kafka-python member to get partitions", lambda: bool(holds(k2)), both2)
        produce(200)
        until("every record to be read",
              lambda: all({v for _, _, v in ledger.reads[p]} >= set(range(p, sent, PARTS)) for p in range(PARTS)),
              both2)
        k2_first = {p: min(o for w, o, _ in ledger.reads[p] if w == "kafka-python-2") for p in holds(k2)
                    if any(w == "kafka-python-2" for w, _, _ in ledger.reads[p])}
        assert k2_first and all(k2_first[p] >= start[p] for p in k2_first)  # no re-read of committed records

        coordinator_after = int(admin.describe_consumer_groups([GROUP])[GROUP].result(15).coordinator.id)
        assert coordinator_after != coordinator
        # no acknowledged commit below one acknowledged before it (the test is sequential, so they are ordered)
        for p in range(PARTS):
            seq = [o for _, q, o in ledger.commits if q == p]
            assert seq == sorted(seq), (p, seq)
        # and what the coordinator answered never went backwards, across the failover
        for p in range(PARTS):
            seen = [obs[p] for obs in ledger.observed if p in obs]
            assert seen == sorted(seen), (p, seen)
        assert len(ledger.observed) > 10
    finally:
        for m in members:
            m.close()
        db.teardown_all()
