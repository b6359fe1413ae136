"""A transactional client fenced while its transaction is open: the commit is `unknown`, and closing
it (what a worker does when it retires the process) does not raise — a raise there crashed the worker
and made a whole run unknown (container detect of lso-ignores-open-txns, 2026-11-28:
INVALID_TXN_STATE from `flush` of a producer in a fatal state)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cluster-impl" / "tests"))
from brokerlib import BrokerProc  # noqa: E402

from kernel.node import Node  # noqa: E402
from kernel.spec import build_spec  # noqa: E402
from kernel.workload import ClientContext, TxnSettings  # noqa: E402
from workloads.librdkafka_txn import LibrdkafkaTxn, connect_with  # noqa: E402


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProc]:
    b = BrokerProc(tmp_path / "data", overrides=["num.partitions=2", "transaction.state.log.replication.factor=1",
                                                  "transaction.state.log.min.isr=1"]).start()
    yield b
    b.kill()


def test_a_fenced_transactional_client_closes_quietly(broker: BrokerProc) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("chaos", 2, 1)]).values():
        f.result(15)
    settings = TxnSettings(10_000, 5_000, lambda spec, p: f"chaos-fence-{p}")
    ctx = ClientContext(build_spec({"topic": "chaos"}), 0, lambda n: broker.bootstrap, [broker.bootstrap],
                        connect_with(settings))
    c = connect_with(settings)(ctx, Node("n1", "127.0.0.1", "127.0.0.1"))
    assert isinstance(c, LibrdkafkaTxn)
    asyncio.run(c.begin())
    c.send(0, 1)
    other = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "chaos-fence-0"})
    other.init_transactions(15)  # fences the first: its epoch is bumped, its open transaction aborted
    outcome, offsets, why = asyncio.run(c.end(True))
    assert outcome == "unknown" and offsets == [None], (outcome, why)
    c.close()  # must not raise, whatever state librdkafka's producer is in
    assert c.producer is None
