"""What the leader-side request modules (`produce.py`, `txn_markers.py`, `txn_verify.py`) use of the
broker core, as Protocols: the core builds them and routes requests to them, so they must not import
the core back (an import cycle, which `tests/unit/test_layers.py` refuses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from logbroker.config import BrokerConfig
from logbroker.core.clock import Clock
from logbroker.core.control_hook import ControlBatchListener
from logbroker.core.metadata import MetadataCache
from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.purgatory import Purgatory
from logbroker.core.reply import Reply
from logbroker.core.topic_config import TopicSettings
from logbroker.protocol.errors import Err

Answer = Callable[[Any], None]  # a decoded response object, or None when the request failed


class LeaderReplication(Protocol):
    """The replication calls a leader's appends make: may the partition take acks=all writes now
    (min.insync.replicas), an append happened (the HW may move), and a Kafka request to a peer."""

    def accepts_produce(self, p: Partition) -> Err: ...

    def on_leader_append(self, p: Partition) -> None: ...

    def ask_broker(self, broker_id: int, request_cls: Any, response_cls: Any, version: int, body: dict[str, Any],
                   answer: Answer) -> None:
        """Send one Kafka request (kafka-python's classes) to another broker; `answer` gets its decoded
        response, or None if it could not be had."""
        ...


class LeaderHost(Protocol):
    """The broker core as its leader-side request modules see it."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def partitions(self) -> dict[TopicPartition, Partition]: ...

    @property
    def purgatory(self) -> Purgatory: ...

    @property
    def replication(self) -> LeaderReplication: ...

    @property
    def control_listener(self) -> ControlBatchListener: ...

    @property
    def handlers(self) -> dict[int, Callable[[int, Any], Reply]]: ...

    def topic_settings(self, topic: str) -> TopicSettings: ...
