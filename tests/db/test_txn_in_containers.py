"""Transactions on a 3-broker cluster in containers, through real clients (issue 27).

A confluent-kafka and an aiokafka transactional producer commit and abort transactions while a
read_committed consumer reads; the broker coordinating the confluent producer's transactional id
(as kafka-python's admin finds it with DescribeTransactions) is killed mid-transaction and started
again, then the leader of a partition. Every committed record is read exactly once by read_committed
consumers, no aborted record is ever returned to them, and no transaction is left hanging once the
transaction timeout has passed. The clients and checks are `cluster-impl/tests/txn_workload.py`'s.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from harness.systems.logbroker.db import LogbrokerDB
from harness.systems.logbroker.settings import BrokerSettings
from kernel.db import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cluster-impl" / "tests"))
from txn_workload import (  # noqa: E402
    Ledger,
    ReadCommitted,
    aiokafka_producer,
    check,
    confluent_producer,
    read_all,
    settled,
    wait_until,
)

pytestmark = pytest.mark.docker
TOPIC, PARTS = "tx", 3


def test_transactions_through_coordinator_and_leader_kills_in_containers(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    nodes = docker_cluster.nodes
    db = LogbrokerDB(BrokerSettings(partitions=PARTS, extra={
        "transaction.state.log.num.partitions": "5", "auto.leader.rebalance.enable": "false",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})).attach(
        Cluster(nodes, {n.name: docker_cluster.remote(n.name) for n in nodes}))
    reader: ReadCommitted | None = None
    try:
        db.setup_all()
        db.create_topic(TOPIC, PARTS, 3)
        boot = db.bootstrap_servers()
        reader = ReadCommitted(boot, TOPIC, PARTS)
        ledger = Ledger()
        producers = [threading.Thread(target=confluent_producer, args=(boot, "c1", TOPIC, PARTS, 60, ledger)),
                     threading.Thread(target=aiokafka_producer, args=(boot, "a1", TOPIC, PARTS, 40, ledger))]
        for t in producers:
            t.start()
        wait_until(lambda: len(ledger.outcomes) >= 10, 180, "10 transactions")
        ops = KafkaAdminClient(bootstrap_servers=boot)
        try:
            coordinator = ops.describe_transactions(["c1"])["c1"].coordinator_id
        finally:
            ops.close()
        victim = db.node_by_broker_id(coordinator)
        assert victim is not None
        db.kill(victim)
        time.sleep(5)
        db.start(victim)
        wait_until(lambda: len(ledger.outcomes) >= 40, 300, "40 transactions")
        md = AdminClient({"bootstrap.servers": boot}).list_topics(TOPIC, timeout=15)
        leader = db.node_by_broker_id(md.topics[TOPIC].partitions[0].leader)
        assert leader is not None
        db.kill(leader)
        time.sleep(5)
        db.start(leader)
        for t in producers:
            t.join(600)
            assert not t.is_alive(), "a producer is stuck"
        wait_until(lambda: settled(boot, TOPIC, PARTS), 120, "every transaction to end (LSO = HW)")
        final = read_all(boot, TOPIC, PARTS)
        wait_until(lambda: reader is not None and set(reader.values) >= set(final), 60, "the reader to catch up")
        reader.stop()
        assert ledger.count("committed") >= 40 and ledger.count("aborted") >= 10, (ledger.outcomes, ledger.errors)
        assert check(ledger, final) == [], ledger.errors
        assert check(ledger, reader.values) == [], ledger.errors
        reader = None
    finally:
        if reader is not None:
            reader.stop()
        db.teardown_all()
