"""The DB protocols (DESIGN.md "Small protocols"; Jepsen's db.clj split into optional capabilities)."""

from __future__ import annotations

from typing import Protocol

from harness.node import Node


class DB(Protocol):
    """Installs/configures the system under test on a node and removes it again."""

    def setup(self, node: Node) -> None:
        """Write configs, start ZooKeeper and the broker on `node`; return when it answers."""
        ...

    def teardown(self, node: Node) -> None:
        """Stop everything on `node` and wipe its data; idempotent."""
        ...


class Killable(Protocol):
    """Processes that can be SIGKILLed and started again (nemesis kills)."""

    def start(self, node: Node) -> None:
        """Start the broker on `node` if it is not running; idempotent."""
        ...

    def kill(self, node: Node) -> None:
        """SIGKILL the broker on `node`; idempotent (no process is fine)."""
        ...


class Pausable(Protocol):
    """Processes that can be frozen with SIGSTOP and resumed with SIGCONT (GC-like pauses)."""

    def pause(self, node: Node, *, process: str = "broker") -> None:
        """SIGSTOP `process` ("broker" or "zookeeper") on `node`."""
        ...

    def resume(self, node: Node, *, process: str = "broker") -> None:
        """SIGCONT `process` on `node`; idempotent."""
        ...


class HasLogFiles(Protocol):
    """Knows which files on a node are worth copying back into the run store."""

    def log_files(self, node: Node) -> list[str]:
        ...


class HasReplicaDumps(Protocol):
    """Can dump every local replica's log (offset, epoch, value, crc, HW, LEO) as JSON Lines."""

    def dump_replicas(self, node: Node) -> dict[str, bytes]:
        """Map of `<topic>-<partition>.jsonl` -> file content for every replica on `node`."""
        ...


class ClusterView(Protocol):
    """Reads who is who from the cluster's metadata (ZooKeeper), for targeted faults."""

    def controller(self) -> Node | None:
        """The node `/controller` names now, or None if there is none."""
        ...

    def controller_epoch(self) -> int | None:
        ...

    def leader(self, topic: str, partition: int) -> Node | None:
        """The node currently leading `topic`-`partition`, or None if offline/unknown."""
        ...
