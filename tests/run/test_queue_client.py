"""The queue workload's client against a real (standalone) broker, cross-checked with a second,
independent client (kafka-python): what the history says was sent and read is what the log holds."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cluster-impl" / "tests"))
from brokerlib import BrokerProc  # noqa: E402

from kernel.node import Node  # noqa: E402
from kernel.spec import build_spec  # noqa: E402
from kernel.workload import ClientContext  # noqa: E402
from workloads import librdkafka  # noqa: E402


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProc]:
    b = BrokerProc(tmp_path / "data", overrides=["num.partitions=2"]).start()
    yield b
    b.kill()


def test_queue_client_sends_and_polls_what_kafka_python_sees(broker: BrokerProc) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("chaos", 2, 1)])
    admin.close()
    ctx = ClientContext(build_spec({"topic": "chaos"}), 0, lambda n: broker.bootstrap, [broker.bootstrap],
                        librdkafka.connect)
    c = librdkafka.connect(ctx, Node("n1", "127.0.0.1", "127.0.0.1"))
    try:
        sent = {}
        for i in range(20):
            [(typ, offset, err)] = asyncio.run(c.send_many([(i % 2, 1000 + i)]))
            assert (typ, err) == ("ok", None)
            sent[(i % 2, offset)] = 1000 + i
        c.assign([0, 1])
        seen: dict[tuple[int, int], int] = {}
        deadline = time.monotonic() + 20
        while len(seen) < 20 and time.monotonic() < deadline:
            for k, pairs in asyncio.run(c.poll(0.5)).items():
                seen.update({(int(k), o): v for o, v in pairs})
        assert seen == sent
        [(typ, _, err)] = asyncio.run(c.send_many([(7, 1)]))  # a partition that does not exist: certainly not written
        assert typ == "fail" and err
    finally:
        c.close()
    other = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    tps = [TopicPartition("chaos", 0), TopicPartition("chaos", 1)]
    other.assign(tps)
    other.seek_to_beginning(*tps)
    got: dict[tuple[int, int], int] = {}
    deadline = time.monotonic() + 20
    while len(got) < 20 and time.monotonic() < deadline:
        for tp, msgs in other.poll(500).items():
            got.update({(tp.partition, m.offset): int(m.value) for m in msgs})
    other.close()
    assert got == sent, "the second client reads exactly what the workload's history recorded"
