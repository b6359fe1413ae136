"""The `Provisioner` protocol: nodes in, nodes out."""

from __future__ import annotations

from typing import Protocol

from harness.node import Node


class Provisioner(Protocol):
    kind: str
    cluster: str

    def up(self, n: int) -> list[Node]:
        """Make `n` nodes reachable over SSH and return them; on any failure (or Ctrl-C) leave nothing behind."""
        ...

    def down(self) -> None:
        """Release this cluster's nodes; idempotent."""
        ...

    def nodes(self) -> list[Node]:
        """The nodes of a cluster that is up (from its saved state); [] if none."""
        ...
