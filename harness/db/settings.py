"""The broker settings a run deploys: the part of the RunSpec that becomes every broker's config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """What goes into every node's broker.properties (plus `--bug` flags on the command line).

    Defaults are the safe configuration: acks=all with RF 3 and min ISR 2, no unclean election, no
    bug switches. `flush_messages=None` keeps the broker's default (fsync left to the OS).
    """

    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    bugs: tuple[str, ...] = ()
    flush_messages: int | None = None
    session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 10000
    partitions: int = 5
    extra: Mapping[str, str] = field(default_factory=dict)
