"""A node: one host of the cluster under test, as a provisioner hands it out.

A `Node` is plain data (it goes into `test.json`); live connections live in `Remote` objects.
Nodes are named n1..nN, as in Jepsen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Node:
    """Where a node is and how to reach it over SSH.

    `ip` is the node's address on the cluster network (what peers and iptables rules use);
    `ssh_host`/`ssh_port` are how the control host reaches sshd (for docker nodes the same ip:22).
    """

    name: str
    ip: str
    ssh_host: str
    ssh_port: int = 22
    user: str = "root"
    key_path: str | None = None
    known_hosts: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Node:
        return cls(**d)


def node_names(n: int) -> list[str]:
    """The canonical names n1..nN."""
    return [f"n{i}" for i in range(1, n + 1)]
