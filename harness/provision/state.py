"""Per-cluster state on the control host: the SSH key pair, known_hosts and the node list.

It lives in `$CHAOS_HOME/clusters/<name>/` (default `~/.chaos`), so `chaos cluster status` and
`exec` find a cluster that `up` made in another process. The key pair is fresh per cluster.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kernel.errors import EnvironmentProblem, UsageError
from kernel.names import check_name, remove_inside
from kernel.node import Node

#: the files a cluster's state directory holds; `remove` deletes these and nothing else
STATE_FILES = ("id_ed25519", "id_ed25519.pub", "known_hosts", "nodes.json", "nodes.json.tmp", "system")


def chaos_home() -> Path:
    """`$CHAOS_HOME` (default `~/.chaos`); an EnvironmentProblem if it exists and is not a directory."""
    home = Path(os.environ.get("CHAOS_HOME") or Path.home() / ".chaos")
    if home.exists() and not home.is_dir():
        raise EnvironmentProblem(f"CHAOS_HOME {home} is not a directory; point it at a directory the harness may use")
    return home


def clusters_root() -> Path:
    return chaos_home() / "clusters"


@dataclass(frozen=True, slots=True)
class ClusterState:
    name: str

    def __post_init__(self) -> None:
        check_name(self.name, "cluster name")

    @property
    def dir(self) -> Path:
        return clusters_root() / self.name

    @property
    def key_path(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def nodes_file(self) -> Path:
        return self.dir / "nodes.json"

    def new_key(self) -> str:
        """Create a fresh ed25519 key pair; return the public key line."""
        self.dir.mkdir(parents=True, exist_ok=True)
        pk = Ed25519PrivateKey.generate()
        pem = pk.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        pub = pk.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        self.key_path.unlink(missing_ok=True)
        fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        line = pub.decode() + f" chaos-{self.name}"
        (self.dir / "id_ed25519.pub").write_text(line + "\n")
        return line

    def save_nodes(self, kind: str, nodes: list[Node]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "nodes.json.tmp"
        tmp.write_text(json.dumps({"provisioner": kind, "nodes": [n.to_json() for n in nodes]}, indent=2))
        tmp.replace(self.nodes_file)

    def load(self) -> tuple[str, list[Node]] | None:
        if not self.nodes_file.exists():
            return None
        try:
            d = json.loads(self.nodes_file.read_text())
            return str(d["provisioner"]), [Node.from_json(n) for n in d["nodes"]]
        except (ValueError, KeyError, TypeError, OSError) as e:
            raise EnvironmentProblem(f"{self.nodes_file} is unreadable ({type(e).__name__}); "
                                     f"remove it with `chaos cluster down --name {self.name}`") from None

    def save_system(self, system: str) -> None:
        """Which system under test the last run deployed here (`chaos heal` attaches to that one)."""
        if self.dir.is_dir():
            (self.dir / "system").write_text(system + "\n")

    def system(self) -> str | None:
        """The system saved by `save_system`, or None (a cluster brought up by hand)."""
        try:
            return (self.dir / "system").read_text().strip() or None
        except OSError:
            return None

    def remove(self) -> None:
        """Delete the files the harness made for this cluster (and the directory if that empties it)."""
        remove_inside(self.dir, clusters_root(), only=STATE_FILES)


def all_states() -> list[ClusterState]:
    """Every saved cluster whose directory name is a valid cluster name (others are not ours)."""
    root = clusters_root()
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        try:
            out.append(ClusterState(p.name))
        except UsageError:
            continue
    return out
