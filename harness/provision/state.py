"""Per-cluster state on the control host: the SSH key pair, known_hosts and the node list.

It lives in `$CHAOS_HOME/clusters/<name>/` (default `~/.chaos`), so `chaos cluster status` and
`exec` find a cluster that `up` made in another process. The key pair is fresh per cluster.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.node import Node


def chaos_home() -> Path:
    return Path(os.environ.get("CHAOS_HOME", Path.home() / ".chaos"))


@dataclass(frozen=True, slots=True)
class ClusterState:
    name: str

    @property
    def dir(self) -> Path:
        return chaos_home() / "clusters" / self.name

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
        self.nodes_file.write_text(json.dumps({"provisioner": kind, "nodes": [n.to_json() for n in nodes]}, indent=2))

    def load(self) -> tuple[str, list[Node]] | None:
        if not self.nodes_file.exists():
            return None
        d = json.loads(self.nodes_file.read_text())
        return d["provisioner"], [Node.from_json(n) for n in d["nodes"]]

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def all_states() -> list[ClusterState]:
    root = chaos_home() / "clusters"
    return [ClusterState(p.name) for p in sorted(root.iterdir())] if root.exists() else []
