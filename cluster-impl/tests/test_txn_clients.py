"""Transactions through real clients on one broker process (issue 27): a confluent-kafka and an
aiokafka transactional producer commit and abort while a read_committed consumer reads; the broker
— coordinator and leader of everything — is SIGKILLed mid-transaction and restarted. Every committed
record is read exactly once by read_committed consumers of both libraries, no aborted one ever, and
no transaction hangs (`txn_workload.py`; three brokers: `replication/test_repl_txn_clients.py`)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from brokerlib import BrokerProc
from txn_workload import (
    Ledger,
    ReadCommitted,
    aiokafka_producer,
    check,
    confluent_producer,
    ends,
    quiet,
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
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "quiet", "transaction.timeout.ms": 6000,
                      "logger": quiet})
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


def test_bad_transactional_input_gets_kafka_errors_and_leaves_the_partition_readable(tmp_path: Path) -> None:
    """An unknown transactional id, an EndTxn for a transaction that does not exist, a wrong epoch (and
    a fenced incarnation's produce): each answered with Kafka's error code over the wire, nothing
    appended, and librdkafka still reads the partition, read_committed and not, to its end."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from logbroker.protocol.apis import APIS, make_message
    from rawclient import RawClient

    b = BrokerProc(tmp_path / "data", overrides=["transaction.state.log.num.partitions=3"]).start()
    raw = RawClient(b.bootstrap)
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in a.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            f.result(15)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "good", "logger": quiet})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(TOPIC, b"committed")
        p.commit_transaction(20)
        before = (ends(b.bootstrap, TOPIC, 1, committed=False), ends(b.bootstrap, TOPIC, 1, committed=True))

        def ask(key: int, version: int, fields: dict[str, object]) -> object:
            return raw.request(make_message(APIS[key].request, version, fields), APIS[key].response)

        init = ask(22, 4, {"transactional_id": "good", "transaction_timeout_ms": 60000, "producer_id": -1,
                           "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch  # type: ignore[attr-defined]  # fences librdkafka's
        add = ask(24, 3, {"v3_and_below_transactional_id": "nobody", "v3_and_below_producer_id": pid,
                          "v3_and_below_producer_epoch": epoch,
                          "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]})
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 49  # type: ignore[attr-defined]  # noqa: E501 - INVALID_PRODUCER_ID_MAPPING
        end = ask(26, 3, {"transactional_id": "good", "producer_id": pid, "producer_epoch": epoch, "committed": True})
        assert end.error_code == 48  # type: ignore[attr-defined]  # INVALID_TXN_STATE: nothing begun
        stale = ask(24, 3, {"v3_and_below_transactional_id": "good", "v3_and_below_producer_id": pid,
                            "v3_and_below_producer_epoch": epoch - 1,
                            "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]})
        assert stale.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 90  # type: ignore[attr-defined]  # noqa: E501 - PRODUCER_FENCED
        old = ask(26, 1, {"transactional_id": "good", "producer_id": pid, "producer_epoch": epoch - 1,
                          "committed": True})
        assert old.error_code == 47  # type: ignore[attr-defined]  # INVALID_PRODUCER_EPOCH (EndTxn v1)
        p.begin_transaction()  # the fenced incarnation carries on, and learns it is fenced
        p.produce(TOPIC, b"zombie")
        with pytest.raises(KafkaException) as fenced:
            p.commit_transaction(10)
        assert fenced.value.args[0].fatal()
        assert (ends(b.bootstrap, TOPIC, 1, committed=False), ends(b.bootstrap, TOPIC, 1, committed=True)) == before
        assert read_all(b.bootstrap, TOPIC, 1) == ["committed"]
        assert read_all_aiokafka(b.bootstrap, TOPIC, 1) == ["committed"]
    finally:
        raw.close()
        b.kill()
