"""What any Kafka-protocol cluster is asked through a Kafka admin client before a workload runs: that
every broker serves its cluster's metadata, and that the workload's topic exists with a leader for
every partition. Shared by every system's deployment (ours and a process system's)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kernel.errors import ProvisionError

_QUIET = logging.getLogger("chaos.librdkafka.admin")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def admin_client(bootstrap: str):  # type: ignore[no-untyped-def]
    """A confluent-kafka AdminClient whose librdkafka log goes nowhere (the run's own log says what failed)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "logger": _QUIET})  # type: ignore[dict-item]


def create_topic(bootstrap: str, brokers: int, topic: str, partitions: int, replication_factor: int,
                 has_leader: Callable[[int], bool], *, timeout: float = 60.0) -> None:
    """Create the topic through Kafka's admin API once `brokers` brokers are known, then wait until
    `has_leader(partition)` holds for every partition (as the system's own view says)."""
    from confluent_kafka.admin import NewTopic

    admin = admin_client(bootstrap)
    deadline = time.monotonic() + timeout
    while len(admin.list_topics(timeout=10).brokers) < brokers:
        if time.monotonic() > deadline:
            raise ProvisionError("not every broker joined the cluster in time")
        time.sleep(0.3)
    for f in admin.create_topics([NewTopic(topic, partitions, replication_factor)]).values():
        try:
            f.result(30)
        except Exception as e:  # KafkaException: the broker refused; say what it said
            raise ProvisionError(f"creating topic {topic} failed: {e}") from None
    while not all(has_leader(p) for p in range(partitions)):
        if time.monotonic() > deadline:
            raise ProvisionError(f"topic {topic} got no leaders in time")
        time.sleep(0.3)


def wait_serving(address: str, brokers: int, deadline: float, where: str, *, controller: bool = True) -> None:
    """Until the broker at `address` answers Metadata with `brokers` brokers (and a controller, when
    `controller`), or one sentence naming `where` to look once `deadline` (monotonic) passes.

    Registered is not serving: a broker may answer Metadata before it knows its cluster, and an admin
    client that asked it waits for a controller it is never told about."""
    seen = "no answer"
    while True:
        admin = admin_client(address)
        try:
            md = admin.list_topics(timeout=5)
            if (md.controller_id >= 0 or not controller) and len(md.brokers) >= brokers:
                return
            seen = f"controller {md.controller_id}, {len(md.brokers)} of {brokers} brokers"
        except Exception as e:  # KafkaException: not answering yet
            seen = str(e)
        if time.monotonic() > deadline:
            raise ProvisionError(f"the broker at {address} did not learn its cluster in time ({seen}); see {where}")
        time.sleep(0.3)
