"""The DB protocols (docs/design.md, "The pieces"; Jepsen's db.clj split into optional capabilities).

A DB is the deployment of the system under test on a cluster of nodes. The orchestrator needs only
`DB` (set up, create the workload's topic, say whether the cluster recovered, tear down); nemeses
need the capabilities they use (`Killable`, `Pausable`, `ClusterView`, `Reassignable`, and those of
`kernel/capabilities.py`); the collect phase needs `HasLogFiles` and `HasReplicaDumps`. A fault
family is typed against these, never against a concrete adapter, so the simulator stands in for the
containers. `recovered` is the one recovery predicate both backends' DBs answer with, over what
they read (`Recovering`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kernel.node import Node
from kernel.remote import Remote
from kernel.system import SystemDecl


@dataclass(frozen=True)
class Cluster:
    """The live nodes of a run and a connection to each (`remotes[node.name]`)."""

    nodes: list[Node]
    remotes: Mapping[str, Remote]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in this cluster ({', '.join(n.name for n in self.nodes)})")

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


@dataclass(frozen=True)
class PartitionState:
    """Who leads a partition and who is in sync, as the cluster's metadata says now."""

    leader: Node | None
    isr: list[Node]
    replicas: list[Node]
    leader_epoch: int | None = None


class DB(Protocol):
    """Installs the system under test on every node, makes the workload's topic, removes it all.
    `system` is its declaration (`kernel.system`): processes, roles, ports, capabilities."""

    system: SystemDecl

    def setup(self, cluster: Cluster) -> None:
        """Write configs and start every process on every node; return when the cluster answers."""
        ...

    def teardown(self, cluster: Cluster) -> None:
        """Stop everything on every node and wipe its data; idempotent."""
        ...

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        """Create the workload's topic and return once every partition has a leader."""
        ...

    def recovered(self, topic: str, partitions: int, replication_factor: int) -> bool:
        """The cluster is whole again (asked after the heal): `recovered(...)` below, on both backends."""
        ...

    def client_address(self, node: Node) -> str:
        """Where a client of `node` connects (host:port)."""
        ...

    def close(self) -> None:
        """Drop connections the DB holds from the control host (metadata readers); idempotent."""
        ...


@runtime_checkable
class Killable(Protocol):
    """Processes that can be SIGKILLed and started again (nemesis kills)."""

    def start(self, node: Node) -> None:
        """Start the broker on `node` if it is not running; idempotent."""
        ...

    def kill(self, node: Node) -> None:
        """SIGKILL the broker on `node`; idempotent (no process is fine)."""
        ...


@runtime_checkable
class Pausable(Protocol):
    """Processes that can be frozen with SIGSTOP and resumed with SIGCONT (GC-like pauses)."""

    def pause(self, node: Node, *, process: str = "broker") -> None:
        """SIGSTOP `process` (a process name of the system's declaration) on `node`."""
        ...

    def resume(self, node: Node, *, process: str = "broker") -> None:
        """SIGCONT `process` on `node`; idempotent."""
        ...


@runtime_checkable
class HasApiVersions(Protocol):
    """Can ask a broker which Kafka APIs it serves (ApiVersions), to refuse a workload it cannot serve."""

    def api_keys(self, node: Node) -> set[int] | str:
        """The API keys `node`'s broker advertises; a one-line reason when it did not answer."""
        ...


@runtime_checkable
class HasLogFiles(Protocol):
    """Knows which of a node's log files are worth keeping in the run store."""

    def logs(self, node: Node) -> dict[str, bytes]:
        """File name -> content of every log worth keeping (one that cannot be read is left out)."""
        ...


@runtime_checkable
class HasReplicaDumps(Protocol):
    """Can dump every local replica's log (offset, epoch, value, crc, HW, LEO) as JSON Lines."""

    def dump_replicas(self, node: Node) -> dict[str, bytes]:
        """Map of `<topic>-<partition>.jsonl` -> file content for every replica on `node`."""
        ...


@runtime_checkable
class ClusterView(Protocol):
    """Reads who is who from the cluster's metadata, for targeted faults and the record."""

    def controller(self) -> Node | None:
        """The node acting as controller now, or None if there is none."""
        ...

    def controller_epoch(self) -> int | None: ...

    def leader(self, topic: str, partition: int) -> Node | None:
        """The node currently leading `topic`-`partition`, or None if offline/unknown."""
        ...

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        """Leader, ISR and replicas of a partition now; None if unknown (metadata out of reach)."""
        ...


@runtime_checkable
class Reassignable(Protocol):
    """Operator requests that move replicas and leadership (the `move` nemesis)."""

    def request_reassignment(self, topic: str, partition: int, nodes: list[Node]) -> None: ...

    def request_preferred_election(self, topic: str, partitions: list[int]) -> bool: ...

    def assignment(self, topic: str, partition: int) -> dict[str, list[str]] | None:
        """{"replicas", "adding", "removing"} as node names; None if unknown."""
        ...


@dataclass(frozen=True)
class LeaderEnd:
    """A partition's ends as its leader reports them: high watermark, log end, leader epoch."""

    hw: int
    leo: int
    leader_epoch: int


@dataclass(frozen=True)
class LeaderView:
    """One broker's Metadata answer for one partition: the leader it sends clients to (-1: none), that
    leader's epoch, and the partition's error code."""

    leader: int
    epoch: int
    error: int = 0

    def to_json(self) -> dict[str, int]:
        return {"leader": self.leader, "epoch": self.epoch, **({"error": self.error} if self.error else {})}


@runtime_checkable
class HasLeaderViews(Protocol):
    """Can ask every broker which leader it names to clients. Clients follow those answers, not the
    controller's word in the metadata store; when a drain gives up on NOT_LEADER, this says who sent it there."""

    def leader_views(self, topic: str) -> dict[str, dict[int, LeaderView] | str]:
        """Node name -> partition -> its view; a one-line reason for a broker that did not answer."""
        ...


@dataclass(frozen=True)
class StableEnd:
    """A partition's last stable offset (what read_committed consumers may read up to) and high
    watermark, as its leader reports them. LSO < HW means a transaction is still open there."""

    lso: int
    hw: int


#: the states of an unfinished transaction, as ListTransactions filters them
OPEN_TXN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


@runtime_checkable
class HasStableEnds(Protocol):
    """Can ask each partition's leader for its LSO and HW. After every fault is healed and every
    transaction has had its timeout to end, an LSO still below the HW is a hanging transaction
    (KIP-664): read_committed consumers stall there for good."""

    def stable_ends(self, topic: str, partitions: int) -> dict[int, StableEnd]:
        """Partition -> its ends, for the partitions whose leader answered."""
        ...

    def open_transactions(self) -> dict[str, str]:
        """Transactional id -> state (Ongoing, PrepareCommit, PrepareAbort) of every unfinished
        transaction a reachable broker coordinates (ListTransactions). One left in a Prepare state
        hangs even where no LSO shows it: its markers are written, its end never is (KAFKA-16352)."""
        ...


@runtime_checkable
class Recovering(ClusterView, Protocol):
    """What the recovery predicate reads, beyond the metadata."""

    def leader_ends(self, topic: str, partitions: int) -> dict[int, LeaderEnd]:
        """Each partition's ends as its current leader reports them; a partition whose leader does not
        answer (or does not think it leads) is left out."""
        ...

    def restarts_registered(self) -> bool:
        """Every broker started again since it was killed has registered anew with the cluster."""
        ...


def recovered(view: Recovering, topic: str, partitions: int, replication_factor: int) -> bool:
    """The one recovery predicate, for every backend: every broker restarted since its kill has
    registered again; every partition has a leader and a full ISR; and each leader agrees it leads
    (its leader epoch is the metadata's) and its high watermark has caught up with its log end.

    Why each part: a killed process's ephemeral registration outlives it by up to a session, and
    until the new process registers and the controller handles that restart (the broker then leaves
    every ISR and leadership, KIP-380's broker epoch) the state znodes look whole but are about to
    change. A leader that just restarted starts from its HW checkpoint (up to a second old) until its
    followers fetch again, and a drain that took that HW as the end would stop short of acknowledged
    records (the simulator's seed 5077). Callers also want the picture to hold a moment
    (`harness.phases.wait_recovered`): the controller needs that moment to handle a registration."""
    if not view.restarts_registered():
        return False
    states = [view.partition(topic, p) for p in range(partitions)]
    if any(s is None or s.leader is None or len(s.isr) < replication_factor for s in states):
        return False
    ends = view.leader_ends(topic, partitions)
    for p, s in enumerate(states):
        e = ends.get(p)
        if e is None or s is None or e.leader_epoch != s.leader_epoch or e.hw < e.leo:
            return False
    return True
