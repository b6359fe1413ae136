"""Real clients against a real broker: confluent-kafka (librdkafka), kafka-python and aiokafka (its own
protocol code, asyncio): each produces and reads back in order through its own request versions."""

from __future__ import annotations

import asyncio
import logging
import time

from brokerlib import BrokerProc

N = 10_000
quiet = logging.getLogger("quiet-librdkafka")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(15)


def _read_confluent(bootstrap: str, topic: str, partition: int, want: int, timeout: float = 30) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False, "logger": quiet})
    c.assign([TopicPartition(topic, partition, 0)])
    got: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                got.append(int(m.value()))
    finally:
        c.close()
    return got


def test_confluent_kafka_produces_10k_acks1_and_reads_them_back_in_order(broker: BrokerProc) -> None:
    from confluent_kafka import Producer

    _create(broker.bootstrap, "ck", 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5, "logger": quiet})
    acked: list[tuple[int, int, int]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), int(msg.value())))  # type: ignore[attr-defined]

    for i in range(N):
        p.produce("ck", value=str(i).encode(), partition=i % 2, on_delivery=on_delivery)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert errors == [] and len(acked) == N
    for part in (0, 1):
        sent = [v for v in range(N) if v % 2 == part]
        offsets = sorted((o, v) for p_, o, v in acked if p_ == part)
        assert [v for _, v in offsets] == sent  # each partition's offsets follow send order
        assert _read_confluent(broker.bootstrap, "ck", part, len(sent)) == sent


def test_kafka_python_produces_10k_acks1_and_reads_them_back_in_order(broker: BrokerProc) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp", 1, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5)
    futures = [p.send("kp", value=str(i).encode(), partition=0) for i in range(N)]
    p.flush(30)
    offsets = [f.get(10).offset for f in futures]
    assert offsets == list(range(N))
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    tp = TopicPartition("kp", 0)
    c.assign([tp])
    c.seek(tp, 0)
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for msgs in c.poll(500, max_records=5000).values():
            got.extend(int(m.value) for m in msgs)
    c.close()
    assert got == list(range(N))


CODECS = (None, "gzip", "snappy", "lz4", "zstd")


def test_aiokafka_idempotent_producer_every_codec_then_a_group_consumer_commits(broker_factory: type) -> None:
    """aiokafka: an idempotent acks=all producer per codec (InitProducerId, sequences, each codec's
    record batches), then a subscribing consumer (FindCoordinator, JoinGroup, SyncGroup, Fetch,
    OffsetCommit) reads every record in each partition's order and commits the ends."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    broker = broker_factory(overrides=["group.initial.rebalance.delay.ms=0"]).start()
    bs, per_codec, parts = broker.bootstrap, 600, 3

    async def main() -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, int | None]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("ak", parts, 1)])
        finally:
            await admin.close()
        sent: dict[int, list[int]] = {p: [] for p in range(parts)}
        for n, codec in enumerate(CODECS):
            prod = AIOKafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True,
                                    compression_type=codec, linger_ms=5)
            await prod.start()
            try:
                values = range(n * per_codec, (n + 1) * per_codec)
                futs = [await prod.send("ak", str(v).encode(), partition=v % parts) for v in values]
                for v, md in zip(values, await asyncio.gather(*futs), strict=True):
                    assert md.partition == v % parts
                    sent[md.partition].append(v)
            finally:
                await prod.stop()
        cons = AIOKafkaConsumer("ak", bootstrap_servers=bs, group_id="ak-group", auto_offset_reset="earliest",
                                enable_auto_commit=False)
        await cons.start()
        got: dict[int, list[int]] = {p: [] for p in range(parts)}
        try:
            deadline = time.monotonic() + 60
            while sum(map(len, got.values())) < len(CODECS) * per_codec and time.monotonic() < deadline:
                for tp, msgs in (await cons.getmany(timeout_ms=500)).items():
                    got[tp.partition].extend(int(m.value) for m in msgs)
                await cons.commit()
            committed = {p: await cons.committed(TopicPartition("ak", p)) for p in range(parts)}
        finally:
            await cons.stop()
        return sent, got, committed

    sent, got, committed = asyncio.run(main())
    assert got == sent  # every record, in each partition's send order, once
    assert committed == {p: len(sent[p]) for p in sent}
