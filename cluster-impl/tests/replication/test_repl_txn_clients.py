"""Transactions through real clients on three broker processes, with kills (issue 27).

A confluent-kafka and an aiokafka transactional producer commit and abort transactions over a
3-partition topic while a read_committed consumer reads it; the transaction coordinator of the
confluent producer's id is SIGKILLed mid-transaction and restarted, then a leader of the topic.
Every committed record must be read exactly once by read_committed consumers, no aborted record
ever returned to them, and no transaction left hanging once the transaction timeout has passed
(every partition's LSO reaches its high watermark). `txn_workload.py` has the clients and checks.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from brokerlib import BrokerProc
from conftest import make_cluster
from logbroker.group.records import partition_for
from test_repl_failover import admin, partition_meta, wait_for
from txn_workload import (
    Ledger,
    ReadCommitted,
    aiokafka_producer,
    check,
    confluent_producer,
    read_all,
    settled,
    wait_until,
)
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper
TOPIC, PARTITIONS, TXN_PARTITIONS = "tx", 3, 5
SETTINGS = (f"transaction.state.log.num.partitions={TXN_PARTITIONS}", "offsets.topic.num.partitions=5",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000", "auto.leader.rebalance.enable=false")


def leader_of(cluster: list[BrokerProc], topic: str, partition: int) -> int:
    return int(wait_for(lambda: max(partition_meta(cluster, topic, partition)[0], 0), 30, what=f"{topic}-{partition}"))


def bounce(b: BrokerProc, down_s: float) -> None:
    b.kill()
    time.sleep(down_s)
    b.start()


def test_transactions_through_coordinator_and_leader_kills(tmp_path: Path, zookeeper: LocalZooKeeper) -> None:
    from confluent_kafka.admin import NewTopic

    cluster = make_cluster(tmp_path, zookeeper, extra=SETTINGS)
    reader: ReadCommitted | None = None
    try:
        a = admin(cluster)
        wait_for(lambda: len(a.list_topics(timeout=10).brokers) == 3, what="three brokers")
        for f in a.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
            f.result(15)
        boot = ",".join(b.bootstrap for b in cluster)
        reader = ReadCommitted(boot, TOPIC, PARTITIONS)
        ledger = Ledger()
        producers = [threading.Thread(target=confluent_producer, args=(boot, "c1", TOPIC, PARTITIONS, 60, ledger)),
                     threading.Thread(target=aiokafka_producer, args=(boot, "a1", TOPIC, PARTITIONS, 40, ledger))]
        for t in producers:
            t.start()
        wait_until(lambda: len(ledger.outcomes) >= 10, 120, "10 transactions")
        coordinator = leader_of(cluster, "__transaction_state", partition_for("c1", TXN_PARTITIONS))
        bounce(cluster[coordinator - 1], 5)
        wait_until(lambda: len(ledger.outcomes) >= 40, 240, "40 transactions")
        bounce(cluster[leader_of(cluster, TOPIC, 0) - 1], 5)
        for t in producers:
            t.join(400)
            assert not t.is_alive(), "a producer is stuck"
        wait_until(lambda: settled(boot, TOPIC, PARTITIONS), 90, "every transaction to end (LSO = HW)")
        final = read_all(boot, TOPIC, PARTITIONS)
        wait_until(lambda: set(reader.values) >= set(final), 60, "the concurrent reader to catch up")
        reader.stop()
        assert ledger.count("committed") >= 40 and ledger.count("aborted") >= 10, (ledger.outcomes, ledger.errors)
        assert check(ledger, final) == [], ledger.errors
        assert check(ledger, reader.values) == [], ledger.errors
        reader = None
    finally:
        if reader is not None:
            reader.stop()
        for b in cluster:
            b.kill()
