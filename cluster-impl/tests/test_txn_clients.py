"""Transactions through real clients on one broker process (issue 27): a confluent-kafka and an
aiokafka transactional producer commit and abort while a read_committed consumer reads; the broker
— coordinator and leader of everything — is SIGKILLed mid-transaction and restarted. Every committed
record is read exactly once by read_committed consumers of both libraries, no aborted one ever, and
no transaction hangs (`txn_workload.py`; three brokers: `replication/test_repl_txn_clients.py`)."""

from __future__ import annotations

import threading
from pathlib import Path

from brokerlib import BrokerProc
from txn_workload import (
    Ledger,
    ReadCommitted,
    aiokafka_producer,
    check,
    confluent_producer,
    read_all,
    read_all_aiokafka,
    settled,
    wait_until,
)

TOPIC, PARTITIONS = "tx", 3


def test_transactions_through_a_broker_kill(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    b = BrokerProc(tmp_path / "data", overrides=[
        "transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"]).start()
    reader: ReadCommitted | None = None
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in a.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            f.result(15)
        reader = ReadCommitted(b.bootstrap, TOPIC, PARTITIONS)
        ledger = Ledger()
        producers = [
            threading.Thread(target=confluent_producer, args=(b.bootstrap, "c1", TOPIC, PARTITIONS, 60, ledger)),
            threading.Thread(target=aiokafka_producer, args=(b.bootstrap, "a1", TOPIC, PARTITIONS, 40, ledger))]
        for t in producers:
            t.start()
        wait_until(lambda: len(ledger.outcomes) >= 20, 120, "20 transactions")
        b.kill()
        b.start()
        for t in producers:
            t.join(400)
            assert not t.is_alive(), "a producer is stuck"
        wait_until(lambda: settled(b.bootstrap, TOPIC, PARTITIONS), 60, "every transaction to end (LSO = HW)")
        final = read_all(b.bootstrap, TOPIC, PARTITIONS)
        wait_until(lambda: set(reader.values) >= set(final), 60, "the concurrent reader to catch up")
        reader.stop()
        assert ledger.count("committed") >= 40 and ledger.count("aborted") >= 15, (ledger.outcomes, ledger.errors)
        assert check(ledger, final) == [], ledger.errors
        assert check(ledger, read_all_aiokafka(b.bootstrap, TOPIC, PARTITIONS)) == [], ledger.errors
        assert check(ledger, reader.values) == [], ledger.errors
        reader = None
    finally:
        if reader is not None:
            reader.stop()
        b.kill()


def test_an_operator_sees_a_hanging_transaction_which_the_timeout_then_aborts(tmp_path: Path) -> None:
    """What `kafka-transactions.sh list/describe` shows, through kafka-python's admin client (which
    sends ListTransactions to every broker and DescribeTransactions to the id's coordinator): a
    producer that went quiet mid-transaction holds the LSO back, until its transaction timeout lets
    the coordinator abort it."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaAdminClient

    b = BrokerProc(tmp_path / "data", overrides=[
        "transaction.state.log.num.partitions=3", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"]
    ).start()
    ops: KafkaAdminClient | None = None
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in a.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            f.result(15)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "quiet", "transaction.timeout.ms": 6000})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(TOPIC, b"open")
        assert p.flush(10) == 0  # written, never committed: the producer goes quiet
        ops = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        listed = [t for ts in ops.list_transactions().values() for t in ts]
        assert [(t.transactional_id, t.state.value) for t in listed] == [("quiet", "Ongoing")]
        d = ops.describe_transactions(["quiet"])["quiet"]
        assert d.state.value == "Ongoing" and {tp.topic for tp in d.topic_partitions} == {TOPIC}
        assert not settled(b.bootstrap, TOPIC, 1)  # it holds the LSO
        wait_until(lambda: ops is not None and ops.describe_transactions(["quiet"])["quiet"].state.value ==
                   "CompleteAbort", 30, "the coordinator to abort the timed-out transaction")
        wait_until(lambda: settled(b.bootstrap, TOPIC, 1), 10, "the LSO to reach the high watermark")
        assert read_all(b.bootstrap, TOPIC, 1) == []
    finally:
        if ops is not None:
            ops.close()
        b.kill()
