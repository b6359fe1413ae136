"""What the transaction coordinator uses of the broker core (`BrokerCore`), as Protocols: what the
leader-side request modules use (`core/leader_host.py`), plus creating `__transaction_state` and the
producer id allocator. The core builds the coordinator and routes the transaction APIs to it, so the
coordinator must not import the core back (an import cycle, which `tests/unit/test_layers.py` refuses).
"""

from __future__ import annotations

from typing import Protocol

from logbroker.core.leader_host import LeaderHost, LeaderReplication
from logbroker.core.producer_id import ProducerIds
from logbroker.protocol.errors import Err


class TxnReplication(LeaderReplication, Protocol):
    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: dict[int, list[int]] | None = None) -> Err: ...


class TxnHost(LeaderHost, Protocol):
    @property
    def replication(self) -> TxnReplication: ...

    @property
    def producer_ids(self) -> ProducerIds: ...
