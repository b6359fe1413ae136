"""Replication with ZooKeeper (cluster-impl II): the broker-side replica manager and its wiring.

`attach(core, store, offload)` replaces the core's `Standalone` replication with a `ReplicaManager`
that registers in the store, runs for controller, obeys LeaderAndIsr, fetches as a follower, and
keeps ISR and HW as a leader (seed 003 C and G, KIP-101/279, KIP-497). Its decisions are pure
functions in `decisions.py`; `manager.py` is the asyncio runner that performs them. The process
entry (`logbroker/__main__.py`) builds the real store (`ZkStore`) and hands it in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logbroker.coord.store import ClusterStore
    from logbroker.core.broker import BrokerCore
    from logbroker.net import Network
    from logbroker.offload import Offload


def attach(core: BrokerCore, store: ClusterStore, offload: Offload, net: Network | None = None) -> None:
    """`net`: real sockets unless the simulator hands in its model network."""
    from logbroker.net import TCP
    from logbroker.replication.manager import ReplicaManager

    core.replication = ReplicaManager(core, store, offload, net or TCP)
