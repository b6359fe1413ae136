"""Replication with ZooKeeper (cluster-impl II): the broker-side replica manager and its wiring.

`attach(core)` replaces the core's `Standalone` replication with a `ReplicaManager` that registers
in ZooKeeper, runs for controller, obeys LeaderAndIsr, fetches as a follower, and keeps ISR and HW
as a leader (seed 003 C and G, KIP-101/279, KIP-497).
"""

from __future__ import annotations

from logbroker.core.broker import BrokerCore


def attach(core: BrokerCore) -> None:
    from logbroker.replication.manager import ReplicaManager

    core.replication = ReplicaManager(core)
