"""Who is who in any Kafka-protocol cluster, as its brokers tell clients (Metadata), from the control host.

Kafka's own protocol says who leads each partition, at which leader epoch, which replicas are in
sync and which broker is the controller; any Kafka-protocol broker answers it, so a system whose
metadata store the harness cannot read (a process system's) is still targeted by role. Broker ids
are mapped to nodes by the host each broker advertises (a node's address), else by node order.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from harness.db.wire import WireError, ask, connected
from kernel.db import PartitionState
from kernel.node import Node

VERSION = 7  # the first with each partition's leader epoch, and not yet flexible


@dataclass(frozen=True, slots=True)
class MetadataAnswer:
    """One broker's Metadata answer: its brokers (id -> host), the controller id, and per partition
    (leader id, leader epoch, replica ids, ISR ids)."""

    brokers: dict[int, str]
    controller_id: int
    partitions: dict[int, tuple[int, int, list[int], list[int]]]


def ask_metadata(address: str, topic: str | None, timeout_s: float = 3.0) -> MetadataAnswer | None:
    """The broker at `address`'s Metadata answer for `topic` (None: every topic is not asked); None
    when it does not answer."""
    topics = [MetadataRequest.MetadataRequestTopic(version=VERSION, name=topic)] if topic else []
    req = MetadataRequest(version=VERSION, topics=topics, allow_auto_topic_creation=False)
    try:
        with connected(address, timeout_s) as sock:
            resp = ask(sock, req, MetadataResponse, VERSION)
    except WireError:
        return None
    parts = {int(p.partition_index): (int(p.leader_id), int(p.leader_epoch), [int(x) for x in p.replica_nodes],
                                      [int(x) for x in p.isr_nodes])
             for t in resp.topics if t.name == topic and t.error_code == 0 for p in t.partitions}
    return MetadataAnswer({int(b.node_id): str(b.host) for b in resp.brokers}, int(resp.controller_id), parts)


class MetadataView:
    """`kernel.db.ClusterView` over Kafka's Metadata, asked of the nodes' brokers in turn until one
    answers. `address(node)` is where a client of that node connects."""

    def __init__(self, nodes: list[Node], port: int) -> None:
        self.nodes = nodes
        self.port = port

    def address(self, node: Node) -> str:
        return f"{node.ip}:{self.port}"

    def answer(self, topic: str | None) -> MetadataAnswer | None:
        for node in self.nodes:
            got = ask_metadata(self.address(node), topic)
            if got is not None:
                return got
        return None

    def node_of(self, broker_id: int, brokers: dict[int, str]) -> Node | None:
        """The node broker `broker_id` runs on: by its advertised host, else by node order (id n = node n)."""
        host = brokers.get(broker_id)
        for n in self.nodes:
            if host is not None and host in (n.ip, n.name):
                return n
        return self.nodes[broker_id - 1] if 1 <= broker_id <= len(self.nodes) else None

    def registered(self) -> set[str] | None:
        """The names of the nodes whose brokers the cluster lists now (None: no broker answered)."""
        got = self.answer(None)
        if got is None:
            return None
        return {n.name for bid in got.brokers if (n := self.node_of(bid, got.brokers)) is not None}

    # --- ClusterView ------------------------------------------------------------------------------
    def controller(self) -> Node | None:
        got = self.answer(None)
        return self.node_of(got.controller_id, got.brokers) if got is not None and got.controller_id >= 0 else None

    def controller_epoch(self) -> int | None:
        return None  # Metadata does not carry it

    def leader(self, topic: str, partition: int) -> Node | None:
        state = self.partition(topic, partition)
        return state.leader if state is not None else None

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        got = self.answer(topic)
        if got is None or partition not in got.partitions:
            return None
        leader, epoch, replicas, isr = got.partitions[partition]

        def nodes(ids: list[int]) -> list[Node]:
            return [n for i in ids if (n := self.node_of(i, got.brokers)) is not None]

        return PartitionState(self.node_of(leader, got.brokers) if leader >= 0 else None, nodes(isr), nodes(replicas),
                              epoch if epoch >= 0 else None)
