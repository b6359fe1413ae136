"""`Remote`: how the harness acts on one node.

Everything the harness does to a node (deploy, start, kill, iptables, fetch logs) goes through
these three calls, so the same DB and nemesis code drives docker nodes and real machines alike.
Every call has a timeout (ducktape's hung SSH calls are the pain point we avoid) and every error
names the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kernel.node import Node


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of one remote command."""

    node: str
    cmd: str
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class Remote(Protocol):
    """A connection to one node. Implementations reuse their transport across calls."""

    node: Node

    def exec(self, cmd: str, *, timeout: float = 60.0, check: bool = True, stdin: bytes | None = None) -> Result:
        """Run `cmd` through the node's shell; with `check`, a non-zero exit raises RemoteCommandError."""
        ...

    def put(self, path: str, data: bytes, *, mode: int = 0o644, timeout: float = 60.0) -> None:
        """Write `data` to `path` on the node (parent directories are created)."""
        ...

    def get(self, path: str, *, timeout: float = 60.0) -> bytes:
        """Read the file at `path` on the node."""
        ...

    def close(self) -> None:
        """Drop the connection; idempotent."""
        ...
