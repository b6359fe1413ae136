"""`MetadataStore`: what the controller needs from its coordination service, as a Protocol;
`BrokerRegistry`: what the replica manager needs for itself; `ProducerIdStore`: where producer ids
come from; `ClusterStore`: all three.

`ZkStore` implements it on a real ZooKeeper. The controller is written against this Protocol, not
against kazoo, so the deterministic simulation backend can hand it an in-memory store (docs/design.md,
"Simulation"). Every write that can race with another controller is conditional on a version and
raises `StaleVersion` when it loses; `watch` callables fire once, on any thread, with no argument
the controller relies on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from logbroker.coord.model import PRODUCER_ID_BLOCK, PartitionState, ProducerIdBlock, Registration, ReplicaAssignment

Watch = Callable[[Any], None]


class StaleVersion(Exception):
    """A conditional write lost: the record changed since we read it."""


class MetadataStore(Protocol):
    def live_brokers(self, watch: Watch | None = None) -> dict[int, tuple[str, int, int]]: ...

    def registrations(self, watch: Watch | None = None) -> dict[int, Registration]: ...

    def lost_data_handled(self, bid: int) -> str | None: ...

    def mark_lost_data_handled(self, bid: int, incarnation: str) -> None: ...

    def topics(self, watch: Watch | None = None) -> list[str]: ...

    def topic_assignment(self, topic: str) -> tuple[dict[int, ReplicaAssignment], int]: ...

    def write_topic_assignment(self, topic: str, parts: dict[int, ReplicaAssignment], expected_version: int) -> int: ...

    def partition_state(self, topic: str, p: int) -> tuple[PartitionState, int] | None: ...

    def write_partition_state(self, topic: str, p: int, state: PartitionState, expected_version: int | None) -> int: ...

    def admin_requests(self, root: str, watch: Watch | None = None) -> dict[tuple[str, int], list[int]]: ...

    def put_admin_requests(self, root: str, entries: dict[tuple[str, int], list[int]]) -> None: ...

    def delete_admin_request(self, root: str, topic: str, p: int) -> None: ...

    def preferred_election_request(self, watch: Watch | None = None) -> list[tuple[str, int]] | None: ...

    def delete_preferred_election_request(self) -> None: ...

    def topic_config(self, topic: str) -> dict[str, str]: ...

    def write_topic_config(self, topic: str, configs: dict[str, str]) -> None: ...

    def delete_topic(self, topic: str) -> None: ...


class BrokerRegistry(Protocol):
    """What a broker needs of the coordination service for itself: a session, its registration, the
    controller lock, and topic creation (seed 003 B, E). Session listeners get the session's state
    name ("LOST" matters: the registration and any controller lock are gone) on any thread."""

    session_listeners: list[Callable[[str], None]]

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def register_broker(self, bid: int, host: str, port: int, lost_data: str = "") -> int:
        """Register this broker; returns its broker epoch (KIP-380)."""
        ...

    def controller(self, watch: Watch | None = None) -> int | None:
        """The current controller's id, None when there is none (the watch fires on a change)."""
        ...

    def try_become_controller(self, bid: int) -> int | None:
        """Take the controller lock; the new controller epoch, or None when someone else has it."""
        ...

    def drop_controller_of_dead_session(self, bid: int) -> bool:
        """If the controller lock names `bid` but another session holds it (an earlier process of this
        broker's that died before its session expired), release it; True if it was."""
        ...

    def controller_epoch(self) -> int:
        """The epoch the last controller election wrote (0 before any)."""
        ...

    def create_topic(self, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None) -> bool:
        """Write a new topic's configs and assignment; False if it exists."""
        ...


class ProducerIdStore(Protocol):
    """Producer ids unique across the cluster and across any broker's lost disk (seed 70017): blocks
    claimed from the store, as Kafka's ZooKeeper-mode `ProducerIdManager`."""

    def claim_producer_id_block(self, bid: int, size: int = PRODUCER_ID_BLOCK) -> ProducerIdBlock:
        """Claim the block after the last one any broker claimed, for broker `bid`: a conditional
        write of the latest-block record (created when absent), read and tried again when another
        broker's claim got there first, so no two claims ever return overlapping blocks."""
        ...


class ClusterStore(MetadataStore, BrokerRegistry, ProducerIdStore, Protocol):
    """Everything a clustered broker is handed (the replica manager and its controller): `ZkStore`
    on a real ZooKeeper, a model in a simulator."""
