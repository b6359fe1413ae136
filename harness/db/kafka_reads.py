"""What the harness asks any Kafka-protocol cluster's brokers directly, for a deployment that knows
its `nodes`, where a client of each connects (`client_address`) and who leads a partition (`leader`):
the features they serve, each partition's LSO and HW from its leader, the unfinished transactions
each coordinates, and the leader each names to clients. Ours and a process system's share it."""

from __future__ import annotations

from harness.db.api_versions import api_keys
from harness.db.metadata_views import leader_views
from harness.db.offsets import stable_ends
from harness.db.transactions import open_transactions
from kernel.db import LeaderView, StableEnd
from kernel.node import Node


class KafkaReads:
    """`HasApiVersions`, `HasStableEnds` and `HasLeaderViews` over the Kafka protocol (a mixin)."""

    nodes: list[Node]

    def client_address(self, node: Node) -> str:
        raise NotImplementedError

    def broker_nodes(self) -> list[Node]:
        """The nodes that run a broker (every node, unless the system places its brokers on some)."""
        return self.nodes

    def leader(self, topic: str, partition: int) -> Node | None:
        raise NotImplementedError

    def by_leader(self, topic: str, partitions: int) -> dict[str, list[int]]:
        """Leader's node name -> the partitions it leads now (a partition without a leader is left out)."""
        out: dict[str, list[int]] = {}
        for p in range(partitions):
            leader = self.leader(topic, p)
            if leader is not None:
                out.setdefault(leader.name, []).append(p)
        return out

    def node_named(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def api_keys(self, node: Node) -> set[int] | str:
        return api_keys(self.client_address(node))

    def stable_ends(self, topic: str, partitions: int) -> dict[int, StableEnd]:
        """Each partition's LSO and HW from its leader (`kernel.db.HasStableEnds`)."""
        out: dict[int, StableEnd] = {}
        for name, keys in self.by_leader(topic, partitions).items():
            out.update(stable_ends(self.client_address(self.node_named(name)), topic, keys))
        return out

    def open_transactions(self) -> dict[str, str]:
        """Every broker's unfinished transactions (`kernel.db.HasStableEnds`)."""
        out: dict[str, str] = {}
        for n in self.broker_nodes():
            out.update(open_transactions(self.client_address(n)))
        return out

    def leader_views(self, topic: str) -> dict[str, dict[int, LeaderView] | str]:
        """Each broker's Metadata answer (`kernel.db.HasLeaderViews`)."""
        return {n.name: leader_views(self.client_address(n), topic) for n in self.broker_nodes()}
