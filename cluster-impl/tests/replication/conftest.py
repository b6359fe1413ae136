"""A real ZooKeeper and three broker processes on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from brokerlib import BrokerProc  # noqa: E402
from zklib import LocalZooKeeper  # noqa: E402


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    zk = LocalZooKeeper(tmp_path).start()
    yield zk
    zk.stop()


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[list[BrokerProc]]:
    """Three brokers, ids 1..3, RF 3, min ISR 2, short session and lag timeouts so failover is quick."""
    brokers = []
    for i in (1, 2, 3):
        b = BrokerProc(tmp_path / f"b{i}", overrides=[
            f"broker.id={i}", f"zookeeper.connect={zookeeper.connect}", "zookeeper.session.timeout.ms=3000",
            "replica.lag.time.max.ms=3000", "default.replication.factor=3", "min.insync.replicas=2",
            "num.partitions=1", "auto.create.topics.enable=false"])
        brokers.append(b)
    for b in brokers:
        b.start()
    yield brokers
    for b in brokers:
        b.kill()
