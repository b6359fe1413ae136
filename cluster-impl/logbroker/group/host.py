"""What the group coordinator uses of the broker core (`BrokerCore`), as a Protocol.

The core builds the coordinator and routes the group APIs to it, so the coordinator must not import
the core back (an import cycle, which `tests/unit/test_layers.py` refuses): it is handed the core and
sees only these parts of it.
"""

from __future__ import annotations

from typing import Protocol

from logbroker.config import BrokerConfig
from logbroker.core.clock import Clock
from logbroker.core.metadata import MetadataCache
from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.purgatory import Purgatory
from logbroker.protocol.errors import Err


class GroupReplication(Protocol):
    """The replication calls the coordinator makes: create `__consumer_offsets`, ask whether a
    partition takes writes now (min.insync), and announce an append so the HW can move."""

    def on_leader_append(self, p: Partition) -> None: ...

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: dict[int, list[int]] | None = None) -> Err: ...

    def accepts_produce(self, p: Partition) -> Err: ...


class GroupHost(Protocol):
    """The broker core as the group coordinator sees it."""

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
    def replication(self) -> GroupReplication: ...

    @property
    def client_host(self) -> str: ...
