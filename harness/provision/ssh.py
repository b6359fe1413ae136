"""The `ssh` provisioner: nodes that already exist, listed in a hosts file.

Hosts file: one node per line, `[name] address[:port]`, `#` comments; names default to n1..nN in
file order. `up` checks that every host answers over SSH with the given user/key and known_hosts,
and names the unreachable ones; it creates nothing, so `down` only forgets the saved state.
"""

from __future__ import annotations

from pathlib import Path

from harness.provision.state import ClusterState
from harness.ssh import SSHRemote
from kernel.db import Cluster
from kernel.errors import ProvisionError, RemoteError, UsageError
from kernel.names import check_name
from kernel.node import Node


def parse_hosts(text: str, *, default_port: int = 22) -> list[tuple[str, str, int]]:
    """(name, address, port) per line; UsageError naming the line on garbage."""
    out: list[tuple[str, str, int]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) > 2:
            raise UsageError(f"hosts file line {lineno}: expected `[name] address[:port]`, got {raw.strip()!r}")
        name = fields[0] if len(fields) == 2 else f"n{len(out) + 1}"
        addr = fields[-1]
        port = default_port
        if addr.count(":") == 1:
            addr, port_s = addr.split(":")
            if not port_s.isdigit():
                raise UsageError(f"hosts file line {lineno}: bad port {port_s!r}")
            port = int(port_s)
        out.append((name, addr, port))
    if len({n for n, _, _ in out}) != len(out):
        raise UsageError("hosts file names a node twice")
    return out


class SSHProvisioner:
    kind = "ssh"

    def __init__(
        self,
        cluster: str = "chaos",
        *,
        hosts: str | Path | None = None,
        user: str = "root",
        port: int = 22,
        key: str | None = None,
        known_hosts: str | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        self.cluster = cluster
        self.state = ClusterState(cluster)
        self.hosts = Path(hosts) if hosts else None
        self.user = user
        self.port = port
        self.key = key
        self.known_hosts = known_hosts or str(Path.home() / ".ssh" / "known_hosts")
        self.connect_timeout = connect_timeout

    def up(self, n: int | None = None) -> list[Node]:
        if self.hosts is None:
            raise UsageError("the ssh provisioner needs --hosts FILE (one `[name] address[:port]` per line)")
        if not self.hosts.is_file():
            raise UsageError(f"hosts file {self.hosts} does not exist or is not a regular file")
        try:
            text = self.hosts.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"hosts file {self.hosts} cannot be read as text: {e}") from None
        entries = parse_hosts(text, default_port=self.port)
        for name, _, _ in entries:
            check_name(name, "hosts file node name")
        if n is not None:
            if n < 1:
                raise UsageError(f"--nodes must be at least 1, not {n}")
            if n > len(entries):
                raise UsageError(f"--nodes {n} but the hosts file lists only {len(entries)} hosts")
            entries = entries[:n]
        nodes = [Node(name, addr, addr, port, self.user, self.key, self.known_hosts) for name, addr, port in entries]
        bad = []
        for node in nodes:
            r = SSHRemote(node, connect_timeout=self.connect_timeout)
            try:
                r.exec("true", timeout=self.connect_timeout)
            except RemoteError as e:
                bad.append(str(e))
            finally:
                r.close()
        if bad:
            raise ProvisionError("unreachable over SSH: " + "; ".join(bad))
        self.state.save_nodes(self.kind, nodes)
        return nodes

    def down(self) -> None:
        self.state.remove()

    def connect(self, nodes: list[Node]) -> Cluster:
        return Cluster(list(nodes), {n.name: SSHRemote(n) for n in nodes})

    def facts(self) -> dict[str, object]:
        return {"hosts_file": str(self.hosts) if self.hosts else None}

    def leftovers(self) -> int:
        return 0  # the hosts are the user's; the DB's teardown before setup cleans what a crash left

    def nodes(self) -> list[Node]:
        loaded = self.state.load()
        return loaded[1] if loaded else []
