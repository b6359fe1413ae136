"""What this broker believes about the cluster: live brokers and each partition's leader/ISR.

Standalone, it holds only this broker. With ZooKeeper (cluster-impl II), the controller's
UpdateMetadata/LeaderAndIsr requests fill it. Metadata responses are built from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the purgatory key of requests waiting for this broker's first view (`BrokerCore.metadata_request`)
FIRST_VIEW = "first-view"
#: how long a Metadata request waits for that view before the connection is closed instead
#: (`logbroker/server.py`): a restart's window normally closes within a few hundred milliseconds of
#: the broker opening its port; a broker cut off from the controller longer must send its clients elsewhere
FIRST_VIEW_WAIT_MS = 2000


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class MetadataCache:
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionMeta]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # overrides (core/topic_config.py)
    controller_id: int = -1
    controller_epoch: int = 0
    #: a whole view has been applied since this process started (the controller's UpdateMetadata, or
    #: standalone start-up). Until then a topic missing here may simply not be known yet: a broker
    #: that restarts can lead `__transaction_state` (LeaderAndIsr) before its first UpdateMetadata
    #: arrives, and must not take every topic for deleted (`txn/markers.py`)
    complete: bool = False
