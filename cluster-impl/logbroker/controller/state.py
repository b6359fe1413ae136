"""The controller's data and the narrow interface its operator requests run against.

`Controller` (controller.py) owns a `ControllerState` and implements `ControllerPrimitives`;
`Operations` (operations.py) is written against the Protocol alone, so imports go one way:
controller -> operations -> state (issue 18: no cycle, and operations can be driven by a fake).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from logbroker.coord.model import PartitionState, ReplicaAssignment
from logbroker.coord.store import MetadataStore, Watch

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """The broker configs the controller obeys (Kafka's names in `logbroker/config.py`)."""

    unclean_leader_election: bool = False
    auto_leader_rebalance: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    leader_imbalance_per_broker_percentage: int = 10
    #: Seed 003 F: the reassignment agent also wakes up on its own, not only when notified.
    reassignment_check_interval_s: float = 5.0
    #: the broker default of `min.insync.replicas` (a topic may override it): below it, members that
    #: leave the ISR stay eligible leaders (KIP-966)
    min_insync_replicas: int = 1
    #: `lost-disk-in-isr` (bugs.py): Kafka's ZooKeeper mode, before KIP-966 — a broker's lost data is
    #: ignored and no replica outside the ISR is an eligible leader
    ignore_lost_data: bool = False


@dataclass
class PartitionInfo:
    assignment: ReplicaAssignment
    state: PartitionState
    version: int

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.assignment.replicas


@dataclass
class ControllerState:
    epoch: int
    brokers: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # id -> host, port, broker epoch
    partitions: dict[Key, PartitionInfo] = field(default_factory=dict)
    topic_versions: dict[str, int] = field(default_factory=dict)
    reassignments: dict[Key, tuple[int, ...]] = field(default_factory=dict)  # partition -> target replicas
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # /config/topics overrides

    @property
    def live(self) -> set[int]:
        return set(self.brokers)


class ControllerPrimitives(Protocol):
    """What an operator request needs of the controller: its view, its lock, the store, and the
    writes and messages that keep the store ahead of the brokers."""

    @property
    def state(self) -> ControllerState | None:
        """The active controller's view; None when this broker is not (or no longer) the controller."""
        ...

    @property
    def lock(self) -> asyncio.Lock:
        """Held for every decision, so the view is never interleaved."""
        ...

    @property
    def zk(self) -> MetadataStore:
        """The metadata store (call it through `store`)."""
        ...

    @property
    def settings(self) -> ControllerSettings: ...

    async def store(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one metadata-store call off the event loop's critical path."""
        ...

    def watch(self, name: str, coro: Callable[[], Awaitable[None]]) -> Watch:
        """A store watch that runs `coro` on the controller's loop when it fires."""
        ...

    async def write(self, topic: str, p: int, info: PartitionInfo, new: PartitionState, *,
                    lost: set[int] | frozenset[int] = frozenset(), unclean: bool = False) -> bool:
        """Conditionally write a partition state (its eligible leader replicas brought up to date: `lost`
        brokers leave them, an `unclean` election forgets them); False (and resigned) if a newer
        controller exists."""
        ...

    async def write_assignment(self, topic: str, adding: dict[int, ReplicaAssignment] | None = None) -> bool:
        """Conditionally rewrite a topic's assignment from the view (plus `adding`)."""
        ...

    async def init_partition(self, topic: str, p: int, asg: ReplicaAssignment) -> None:
        """Give a new partition its first leader and ISR (seed 003 B)."""
        ...

    def broadcast(self, *, init: bool = False, full: bool = False, only: Iterable[Key] | None = None,
                  to: list[int] | None = None) -> None:
        """Queue LeaderAndIsr to the replicas of `only` (all if None), then UpdateMetadata to all."""
        ...

    def stop_replicas(self, targets: dict[int, list[Key]], *, delete: bool) -> None:
        """Queue StopReplica to each broker for its listed partitions."""
        ...
