"""What the transaction coordinator uses of the broker core (`BrokerCore`), as Protocols.

The core builds the coordinator and routes the transaction APIs to it, so the coordinator must not
import the core back (an import cycle, which `tests/unit/test_layers.py` refuses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from logbroker.config import BrokerConfig
from logbroker.core.clock import Clock
from logbroker.core.leader_host import Answer
from logbroker.core.metadata import MetadataCache
from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.producer_id import ProducerIdAllocator
from logbroker.core.purgatory import Purgatory
from logbroker.core.reply import Reply
from logbroker.protocol.errors import Err


class TxnReplication(Protocol):
    """Create `__transaction_state`, take acks=all writes to it, and send requests to other brokers."""

    def on_leader_append(self, p: Partition) -> None: ...

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: dict[int, list[int]] | None = None) -> Err: ...

    def accepts_produce(self, p: Partition) -> Err: ...

    def ask_broker(self, broker_id: int, request_cls: Any, response_cls: Any, version: int, body: dict[str, Any],
                   answer: Answer) -> None: ...


class TxnHost(Protocol):
    """The broker core as the transaction coordinator sees it."""

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
    def replication(self) -> TxnReplication: ...

    @property
    def producer_ids(self) -> ProducerIdAllocator: ...

    @property
    def handlers(self) -> dict[int, Callable[[int, Any], Reply]]: ...
