"""Transactions on a real broker process, the partition side: transactional batches and markers in
the log, the read_committed consumers of librdkafka, kafka-python and aiokafka, and bad input that
must be refused and leave the partition readable.

The transactional records here come from a raw client with a producer id from InitProducerId, and
the markers from raw WriteTxnMarkers requests, as a coordinator sends them: these tests are about
what the partition does with them (KIP-890 verification is off; its tests ask a real coordinator).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from brokerlib import BrokerProc
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from logbroker.dump import dump_partition
from logbroker.log.control import ControlMarker, marker_batch
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from rawclient import RawClient, batch
from test_broker_clients import _create
from test_txn_partition import txn_batch

quiet = logging.getLogger("quiet-librdkafka-txn")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
TOPIC = "tx"
NO_VERIFY = ["transaction.kip890.enable=false"]


def init_pid(c: RawClient) -> int:
    r = c.request(make_message(InitProducerIdRequest, 1, {"transactional_id": None, "transaction_timeout_ms": 60000}),
                  InitProducerIdResponse)
    assert r.error_code == 0
    return int(r.producer_id)


def produce(c: RawClient, records: bytes, txn_id: str | None = "t1") -> int:
    req = make_message(ProduceRequest, 9, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
                                           "topic_data": [{"name": TOPIC, "partition_data": [
                                               {"index": 0, "records": records}]}]})
    return int(c.request(req, ProduceResponse).responses[0].partition_responses[0].error_code)


def end_txn(c: RawClient, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0,
            topic: str = TOPIC) -> int:
    req = make_message(WriteTxnMarkersRequest, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch, "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    return int(c.request(req, WriteTxnMarkersResponse).markers[0].topics[0].partitions[0].error_code)


def latest(c: RawClient, committed: bool) -> int:
    req = make_message(ListOffsetsRequest, 2, {"replica_id": -1, "isolation_level": int(committed), "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return int(c.request(req, ListOffsetsResponse).topics[0].partitions[0].offset)


def read(bootstrap: str, committed: bool, want: int, settle: float = 1.5) -> list[int]:
    """Every value librdkafka returns from offset 0: until `want` have come and then `settle` seconds
    pass with nothing more (so a record that should not come has had its chance)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted", "logger": quiet})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[int] = []
    deadline = time.monotonic() + 30
    quiet_since = None
    try:
        while time.monotonic() < deadline:
            msgs = c.consume(100, 0.25)
            for m in msgs:
                assert m.error() is None, m.error()
                got.append(int(m.value()))
            if len(got) >= want:
                quiet_since = quiet_since or time.monotonic()
                if msgs:
                    quiet_since = time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    break
    finally:
        c.close()
    return got


def read_kafka_python(bootstrap: str, want: int) -> list[int]:
    """kafka-python's read_committed consumer (its own handling of the aborted-transaction list)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      consumer_timeout_ms=3000)
    c.assign([KTP(TOPIC, 0)])
    c.seek(KTP(TOPIC, 0), 0)
    got: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < want and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got.extend(int(r.value) for r in recs)
        got.extend(int(r.value) for recs in c.poll(timeout_ms=1500).values() for r in recs)  # nothing more
    finally:
        c.close()
    return got


def read_aiokafka(bootstrap: str, want: int) -> list[int]:
    """aiokafka's read_committed consumer."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def go() -> list[int]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
        await c.start()
        got: list[int] = []
        try:
            c.assign([ATP(TOPIC, 0)])
            c.seek(ATP(TOPIC, 0), 0)
            deadline = time.monotonic() + 30
            while len(got) < want and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got.extend(int(r.value) for r in recs)
            for recs in (await c.getmany(timeout_ms=1500)).values():  # nothing more
                got.extend(int(r.value) for r in recs)
        finally:
            await c.stop()
        return got

    return asyncio.run(go())


def ints(values: list[int]) -> list[bytes]:
    return [str(v).encode() for v in values]


def txn(pid: int, epoch: int, seq: int, values: list[int]) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=None, key=None, value=str(v).encode(), headers=[])
    return bytes(b.build())


@pytest.fixture
def txbroker(broker_factory: Any) -> BrokerProc:
    b: BrokerProc = broker_factory(overrides=NO_VERIFY).start()
    _create(b.bootstrap, TOPIC, 1)
    return b


def test_librdkafka_read_committed_reads_committed_records_only(txbroker: BrokerProc) -> None:
    c = RawClient(txbroker.bootstrap)
    a, b = init_pid(c), init_pid(c)
    assert produce(c, batch(ints([0, 1])), txn_id=None) == 0  # 0..1
    assert produce(c, txn(a, 0, 0, [10, 11])) == 0  # 2..3
    assert produce(c, txn(b, 0, 0, [20, 21])) == 0  # 4..5
    assert produce(c, batch(ints([2])), txn_id=None) == 0  # 6
    assert latest(c, committed=True) == 2 and latest(c, committed=False) == 7
    assert read(txbroker.bootstrap, committed=True, want=2) == [0, 1], "nothing of an open transaction"
    assert end_txn(c, a, 0, commit=True) == 0  # 7
    assert end_txn(c, b, 0, commit=False) == 0  # 8
    assert latest(c, committed=True) == 9
    assert read(txbroker.bootstrap, committed=True, want=5) == [0, 1, 10, 11, 2]
    assert read(txbroker.bootstrap, committed=False, want=7) == [0, 1, 10, 11, 20, 21, 2]
    assert read_kafka_python(txbroker.bootstrap, want=5) == [0, 1, 10, 11, 2]
    assert read_aiokafka(txbroker.bootstrap, want=5) == [0, 1, 10, 11, 2]
    summary = dump_partition(txbroker.data / f"{TOPIC}-0")[0]
    assert summary["markers"] == [[7, "commit", a], [8, "abort", b]]
    # a restart keeps all of it (and the aborted-transaction index), from the snapshot written at shutdown
    c.close()
    assert txbroker.stop() == 0
    txbroker.start()
    assert read(txbroker.bootstrap, committed=True, want=5) == [0, 1, 10, 11, 2]


def test_bad_transactional_input_gets_its_error_appends_nothing_and_leaves_the_partition_readable(
        txbroker: BrokerProc) -> None:
    c = RawClient(txbroker.bootstrap)
    pid = init_pid(c)
    assert produce(c, txn(pid, 1, 0, [100])) == 0  # 0, producer at epoch 1, transaction open
    end = latest(c, committed=False)
    refused = {
        "wrong epoch": (produce(c, txn(pid, 0, 1, [101])), Err.INVALID_PRODUCER_EPOCH),
        "transactional without a transactional id": (produce(c, txn(pid, 1, 1, [102]), txn_id=None),
                                                     Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        "a client's control batch": (produce(c, marker_batch(pid, 1, ControlMarker(True, 0), 0)), Err.INVALID_RECORD),
        "a non-transactional write inside the transaction": (
            produce(c, txn_batch(pid, 1, 1, transactional=False), txn_id=None), Err.INVALID_TXN_STATE),
        "a marker for a partition that does not exist": (end_txn(c, pid, 1, True, topic="nope"),
                                                         Err.UNKNOWN_TOPIC_OR_PARTITION),
    }
    assert {k: Err(got) for k, (got, _) in refused.items()} == {k: want for k, (_, want) in refused.items()}
    assert latest(c, committed=False) == end, "nothing appended"
    assert end_txn(c, pid, 1, commit=True, coordinator_epoch=3) == 0
    assert end_txn(c, pid, 1, commit=False, coordinator_epoch=2) == Err.TRANSACTION_COORDINATOR_FENCED
    assert latest(c, committed=False) == end + 1, "only the good marker"
    c.close()
    assert read(txbroker.bootstrap, committed=True, want=1) == [100]
    assert read(txbroker.bootstrap, committed=False, want=1) == [100]


@pytest.mark.parametrize("bug", [False, True], ids=["correct", "lso-ignores-open-txns"])
def test_lso_ignores_open_txns_switch(broker_factory: Any, bug: bool) -> None:
    """The switch serves an open transaction's records to read_committed consumers (aborted reads, if it
    then aborts): what a correct broker never does."""
    b: BrokerProc = broker_factory(overrides=NO_VERIFY, bugs=["lso-ignores-open-txns"] if bug else []).start()
    _create(b.bootstrap, TOPIC, 1)
    c = RawClient(b.bootstrap)
    pid = init_pid(c)
    assert produce(c, txn(pid, 0, 0, [1, 2])) == 0
    assert read(b.bootstrap, committed=True, want=0) == ([1, 2] if bug else [])
    assert end_txn(c, pid, 0, commit=False) == 0
    c.close()
    assert read(b.bootstrap, committed=True, want=0) == [], "aborted: librdkafka drops them either way"


def test_an_operator_finds_a_hanging_transaction_and_aborts_it_with_kafka_pythons_admin(txbroker: BrokerProc) -> None:
    """KIP-664 on the partition side: DescribeProducers shows the open transaction holding the LSO;
    WriteTxnMarkers from the admin client (coordinator epoch -1) aborts it, and read_committed moves on."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.admin._transactions import AbortTransactionSpec

    c = RawClient(txbroker.bootstrap)
    pid = init_pid(c)
    assert produce(c, txn(pid, 0, 0, [1, 2])) == 0  # 0..1: a transaction no coordinator will end
    assert produce(c, batch(ints([3])), txn_id=None) == 0  # 2
    assert latest(c, committed=True) == 0
    admin = KafkaAdminClient(bootstrap_servers=txbroker.bootstrap)
    try:
        (state,) = admin.describe_producers([KTP(TOPIC, 0)]).values()
        hanging = [p for p in state.active_producers if p.current_transaction_start_offset >= 0]
        assert [(p.producer_id, p.current_transaction_start_offset) for p in hanging] == [(pid, 0)]
        admin.abort_transaction(AbortTransactionSpec(KTP(TOPIC, 0), pid, hanging[0].producer_epoch))
    finally:
        admin.close()
    assert latest(c, committed=True) == 4
    c.close()
    assert read(txbroker.bootstrap, committed=True, want=1) == [3]


def begin_txn(c: RawClient, txn_id: str, partitions: list[int]) -> tuple[int, int]:
    """As a transactional client does, through the broker's own coordinator: InitProducerId with the
    transactional id, then AddPartitionsToTxn for `partitions`; (producer id, epoch)."""
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
    from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

    deadline = time.monotonic() + 30
    while True:  # the first FindCoordinator creates __transaction_state; its coordinator loads it
        found = c.request(make_message(FindCoordinatorRequest, 1, {"key": txn_id, "key_type": 1}),
                          FindCoordinatorResponse)
        r = c.request(make_message(InitProducerIdRequest, 1, {"transactional_id": txn_id,
                                                              "transaction_timeout_ms": 60000}),
                      InitProducerIdResponse)
        if (found.error_code == 0 and r.error_code == 0) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.error_code == 0, Err(r.error_code)
    add = c.request(make_message(AddPartitionsToTxnRequest, 1, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": r.producer_id,
        "v3_and_below_producer_epoch": r.producer_epoch,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": partitions}]}), AddPartitionsToTxnResponse)
    assert all(p.partition_error_code == 0 for t in add.results_by_topic_v3_and_below for p in t.results_by_partition)
    return int(r.producer_id), int(r.producer_epoch)


def produce_to(c: RawClient, partition: int, records: bytes, txn_id: str) -> int:
    req = make_message(ProduceRequest, 9, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
                                           "topic_data": [{"name": TOPIC, "partition_data": [
                                               {"index": partition, "records": records}]}]})
    return int(c.request(req, ProduceResponse).responses[0].partition_responses[0].error_code)


def lso(c: RawClient, partition: int) -> int:
    req = make_message(ListOffsetsRequest, 2, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    return int(c.request(req, ListOffsetsResponse).topics[0].partitions[0].offset)


@pytest.mark.parametrize("bug", [False, True], ids=["correct", "no-txn-verification"])
def test_kip890_a_partition_outside_the_transaction_is_refused(broker_factory: Any, bug: bool) -> None:
    """KIP-890 part 1 against the broker's real transaction coordinator: a transactional write to a
    partition never added to the transaction is refused. Without the check (the switch) it opens a
    transaction the coordinator knows nothing of: the commit's markers never reach it, and it hangs there
    for good, holding read_committed consumers (or, after KIP-890 part 2's epoch bump is missing, joins
    the producer's next transaction: Bufstream's torn transactions)."""
    from kafka.protocol.producer.transaction import EndTxnRequest, EndTxnResponse

    b: BrokerProc = broker_factory(bugs=["no-txn-verification"] if bug else [],
                                   overrides=["transaction.state.log.num.partitions=3"]).start()
    _create(b.bootstrap, TOPIC, 2)
    c = RawClient(b.bootstrap)
    pid, epoch = begin_txn(c, "kip890", [0])
    assert produce_to(c, 0, txn(pid, epoch, 0, [1]), "kip890") == 0
    stray = produce_to(c, 1, txn(pid, epoch, 0, [2]), "kip890")
    end = c.request(make_message(EndTxnRequest, 1, {"transactional_id": "kip890", "producer_id": pid,
                                                    "producer_epoch": epoch, "committed": True}), EndTxnResponse)
    assert end.error_code == 0
    wait_until = time.monotonic() + 10
    while lso(c, 0) != 2 and time.monotonic() < wait_until:  # the coordinator's marker reaches partition 0
        time.sleep(0.1)
    assert lso(c, 0) == 2
    if bug:
        assert stray == 0, "the switch lets the stray write in"
        assert lso(c, 1) == 0, "a transaction no coordinator will end: it hangs"
    else:
        assert stray == Err.INVALID_TXN_STATE
        assert latest(c, committed=False) == 2 and lso(c, 1) == 0  # partition 0's count; nothing in 1
        req = make_message(ListOffsetsRequest, 2, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 1, "timestamp": -1}]}]})
        assert c.request(req, ListOffsetsResponse).topics[0].partitions[0].offset == 0, "nothing appended"
    c.close()
