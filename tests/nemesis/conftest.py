"""What the container tests of the fault families share: one deployment per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.systems.logbroker.db import LogbrokerDB
from harness.systems.logbroker.settings import BrokerSettings
from kernel.db import Cluster

#: short timeouts, so a composition's waits fit a test; no fsync of the brokers' own (Kafka's default),
#: so a crash that loses unsynced writes has something to lose
SETTINGS = BrokerSettings(partitions=3, session_timeout_ms=4000, replica_lag_time_max_ms=5000)


@pytest.fixture(scope="module")
def deployed(_cluster_manager) -> Iterator[tuple[LogbrokerDB, Cluster]]:  # type: ignore[no-untyped-def]
    """3 nodes with ZooKeeper and brokers, and a 3-partition RF 3 topic `chaos`, for one module."""
    dc = _cluster_manager.get()
    cluster = Cluster(dc.nodes, {n.name: dc.remote(n.name) for n in dc.nodes})
    db = LogbrokerDB(SETTINGS)
    db.setup(cluster)
    db.create_topic("chaos", 3, 3)
    try:
        yield db, cluster
    finally:
        db.teardown_all()
