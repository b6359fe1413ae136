"""Kafka's ZooKeeper layout, as far as the harness reads or writes it (seed 003; Apache Kafka's own).

The broker keeps its copy in `cluster-impl/logbroker/coord/paths.py`; the harness never imports the
system under test, so `tests/foundation/test_layers.py` reads both files and checks they agree.
"""

from __future__ import annotations

CONTROLLER = "/controller"  # ephemeral: {"brokerid": id}
CONTROLLER_EPOCH = "/controller_epoch"  # integer
BROKER_IDS = "/brokers/ids"
LOST_DATA_HANDLED = "/brokers/lost_data_handled"  # /<id>: the lost-data registration a controller handled
TOPICS = "/brokers/topics"
REASSIGN = "/admin/partitions_reassigned"
PREFERRED_ELECTION = "/admin/preferred_replica_election"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def partition_state(name: str, p: int) -> str:
    return f"{TOPICS}/{name}/partitions/{p}/state"


def admin_entry(root: str, name: str, p: int) -> str:
    return f"{root}/{name}/{p}"
