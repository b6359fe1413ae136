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


def make_cluster(root: Path, zk: LocalZooKeeper, *, min_isr: int = 2, bugs: tuple[str, ...] = (),
                 session_ms: int = 3000, lag_ms: int = 3000, n: int = 3,
                 extra: tuple[str, ...] = ()) -> list[BrokerProc]:
    """`n` brokers, ids 1..n, RF 3, short session and lag timeouts so failover is quick; `extra`
    are more `key=value` broker configs."""
    brokers = []
    for i in range(1, n + 1):
        b = BrokerProc(root / f"b{i}", overrides=[
            f"broker.id={i}", f"zookeeper.connect={zk.connect}", f"zookeeper.session.timeout.ms={session_ms}",
            f"replica.lag.time.max.ms={lag_ms}", "default.replication.factor=3", f"min.insync.replicas={min_isr}",
            "num.partitions=1", "auto.create.topics.enable=false", *extra], bugs=list(bugs))
        brokers.append(b)
    for b in brokers:
        b.start()
    return brokers


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[list[BrokerProc]]:
    brokers = make_cluster(tmp_path, zookeeper)
    yield brokers
    for b in brokers:
        b.kill()
