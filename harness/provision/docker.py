"""The `docker` provisioner: node containers n1..nN on one labelled bridge network.

Each container runs the node image (tini → sshd), has a static address on a fixed per-cluster
subnet, its hostname, /etc/hosts entries for its peers and NET_ADMIN so iptables works inside it.
The control host talks to the nodes directly over the bridge. Host keys are read from the running
containers through the Docker API (not trusted on first use) into the cluster's known_hosts.

Everything carries the label `chaos.cluster=<name>`; `up` removes what it made if anything fails
or the user presses Ctrl-C, and `down_all` removes every labelled container and network.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import socket
import time
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import docker.types

from harness.image.build import NODE_TAG_LATEST, ensure_node_image
from harness.image.build import docker_client as _client
from harness.provision.state import ClusterState
from harness.signals import shielded
from harness.ssh import SSHRemote
from kernel.db import Cluster
from kernel.errors import ProvisionError, UsageError
from kernel.names import check_name
from kernel.node import Node, node_names

LABEL = "chaos.cluster"


MAX_NODES = 50


def _used_subnets(client: docker.DockerClient) -> list[ipaddress.IPv4Network]:
    out = []
    for net in client.networks.list():
        for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
            sub = cfg.get("Subnet")
            if sub and ":" not in sub:
                out.append(ipaddress.IPv4Network(sub, strict=False))
    return out


def choose_subnet(name: str, used: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    """A /24 in 10.213.0.0/16 derived from the cluster name; the next free one if that clashes."""
    start = int(hashlib.sha256(name.encode()).hexdigest(), 16) % 250
    for i in range(250):
        candidate = ipaddress.IPv4Network(f"10.213.{(start + i) % 250 + 1}.0/24")
        if not any(candidate.overlaps(u) for u in used):
            return candidate
    raise ProvisionError("no free /24 left in 10.213.0.0/16 for a cluster network")


class DockerProvisioner:
    kind = "docker"

    def __init__(self, cluster: str = "chaos", *, image: str | None = None, build_image: bool = True) -> None:
        self.cluster = check_name(cluster, "cluster name")
        self.state = ClusterState(cluster)
        self._image = image
        self._build_image = build_image
        self._image_id: str | None = None
        self._image_tag: str | None = None

    @property
    def network_name(self) -> str:
        return f"chaos-{self.cluster}"

    def container_name(self, node: str) -> str:
        return f"chaos-{self.cluster}-{node}"

    # --- up ------------------------------------------------------------------------------------
    def up(self, n: int, *, ssh_timeout: float = 60.0) -> list[Node]:
        """Make n containers; on any failure or Ctrl-C, remove everything this cluster has.

        A Ctrl-C can land while the engine is still creating a container we asked for (our HTTP call
        is abandoned, the engine's work is not), so the cleanup keeps sweeping until it sees nothing
        labelled for a short while (`_remove(..., settle_s=...)`)."""
        if not 1 <= n <= MAX_NODES:
            raise UsageError(f"--nodes must be between 1 and {MAX_NODES}, not {n}")
        client = _client()
        if self.leftovers():
            raise ProvisionError(
                f"cluster {self.cluster!r} already has containers or a network; run `chaos cluster down "
                f"--name {self.cluster}` first"
            )
        image = self._image or (ensure_node_image().tag if self._build_image else NODE_TAG_LATEST)
        try:
            self._image_id = str(client.images.get(image).id)
        except docker.errors.DockerException:
            self._image_id = None
        self._image_tag = image
        try:
            return self._up(client, n, image, ssh_timeout)
        except BaseException:
            # Ctrl-C or any failure half-way: leave nothing behind.
            _remove(_client(), f"{LABEL}={self.cluster}", settle_s=3.0)
            self.state.remove()
            raise

    def _up(self, client: docker.DockerClient, n: int, image: str, ssh_timeout: float) -> list[Node]:
        labels = {LABEL: self.cluster}
        subnet = choose_subnet(self.cluster, _used_subnets(client))
        hosts = list(subnet.hosts())
        gateway = str(hosts[0])
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=str(subnet), gateway=gateway)])
        with shielded():
            try:
                client.networks.create(self.network_name, driver="bridge", ipam=ipam, labels=labels,
                                       check_duplicate=True)
            except docker.errors.APIError as e:
                raise ProvisionError(f"cannot create the network {self.network_name}: {_engine_says(e)}") from None
        pubkey = self.state.new_key()
        names = node_names(n)
        ips = {name: str(hosts[i + 1]) for i, name in enumerate(names)}
        api = client.api
        for name in names:
            host_config = api.create_host_config(
                cap_add=["NET_ADMIN", "SYS_ADMIN"],  # iptables; mounting the broker's FUSE disk (`lazyfs`)
                devices=["/dev/fuse:/dev/fuse:rwm"],
                extra_hosts={peer: ips[peer] for peer in names},
                init=False,
                shm_size="64m",
            )
            net_cfg = api.create_networking_config(
                {self.network_name: api.create_endpoint_config(ipv4_address=ips[name], aliases=[name])}
            )
            with shielded(), _engine_errors(f"container {self.container_name(name)}"):
                cid = api.create_container(
                    image,
                    name=self.container_name(name),
                    hostname=name,
                    labels={**labels, "chaos.node": name},
                    environment={"CHAOS_AUTHORIZED_KEY": pubkey},
                    host_config=host_config,
                    networking_config=net_cfg,
                    detach=True,
                )["Id"]
                api.start(cid)
        nodes = [
            Node(name, ips[name], ips[name], 22, "root", str(self.state.key_path), str(self.state.known_hosts))
            for name in names
        ]
        self._write_known_hosts(client, nodes, time.monotonic() + ssh_timeout)
        self.state.save_nodes(self.kind, nodes)
        return nodes

    def _write_known_hosts(self, client: docker.DockerClient, nodes: list[Node], deadline: float) -> None:
        """Wait until each node's sshd listens; record its host key, read through the Docker API."""
        lines = []
        for node in nodes:
            container = client.containers.get(self.container_name(node.name))
            while True:
                key = self._host_key(container)
                if key and self._port_open(node.ip, 22):
                    lines.append(f"{node.ip} {key}")
                    break
                container.reload()
                if container.status not in ("created", "running"):
                    logs = container.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
                    raise ProvisionError(f"{node.name}: container exited ({container.status}): {logs}")
                if time.monotonic() > deadline:
                    raise ProvisionError(f"{node.name}: sshd did not come up at {node.ip}:22 in time")
                time.sleep(0.2)
        self.state.known_hosts.write_text("\n".join(lines) + "\n")

    @staticmethod
    def _host_key(container: Any) -> str | None:
        res = container.exec_run(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"])
        if res.exit_code != 0:
            return None
        parts = res.output.decode().split()
        return f"{parts[0]} {parts[1]}" if len(parts) >= 2 else None

    @staticmethod
    def _port_open(ip: str, port: int) -> bool:
        try:
            with socket.create_connection((ip, port), timeout=1):
                return True
        except OSError:
            return False

    def connect(self, nodes: list[Node]) -> Cluster:
        return Cluster(list(nodes), {n.name: SSHRemote(n) for n in nodes})

    def facts(self) -> dict[str, object]:
        """What test.json should say about where the nodes came from (the node image)."""
        return {"image": self._image_id, "image_tag": self._image_tag}

    def leftovers(self) -> int:
        """Labelled containers and networks of this cluster name (an earlier run that crashed)."""
        client = _client()
        flt = {"label": f"{LABEL}={self.cluster}"}
        return len(client.api.containers(all=True, filters=flt)) + len(client.networks.list(filters=flt))

    # --- down ----------------------------------------------------------------------------------
    def down(self) -> None:
        _remove(_client(), f"{LABEL}={self.cluster}")
        self.state.remove()

    def nodes(self) -> list[Node]:
        loaded = self.state.load()
        return loaded[1] if loaded else []

    def status(self) -> list[dict[str, str]]:
        client = _client()
        out = []
        for c in client.containers.list(all=True, filters={"label": f"{LABEL}={self.cluster}"}):
            nets = c.attrs.get("NetworkSettings", {}).get("Networks", {})
            ip = next((v.get("IPAddress") for v in nets.values()), "")
            out.append({"node": c.labels.get("chaos.node", c.name), "container": c.name, "status": c.status, "ip": ip})
        return sorted(out, key=lambda d: (len(d["node"]), d["node"]))


def _engine_says(e: docker.errors.APIError) -> str:
    return str(getattr(e, "explanation", None) or e).strip().splitlines()[0][:200]


@contextlib.contextmanager
def _engine_errors(what: str) -> Iterator[None]:
    """An engine refusal (a name taken, an image missing) is the user's or the machine's, not a bug."""
    try:
        yield
    except docker.errors.APIError as e:
        raise ProvisionError(f"docker refused to make {what}: {_engine_says(e)}") from None


def _remove(client: docker.DockerClient, label_filter: str, settle_s: float = 0.0) -> tuple[int, int]:
    """Remove containers, then networks, matching `label_filter`; count what went.

    With `settle_s`, keep sweeping until nothing labelled has appeared for that long (an abandoned
    create call may still produce a container after our first sweep)."""
    removed_c = removed_n = 0
    quiet_since = time.monotonic()
    while True:
        # the low-level list does not inspect each container, so one vanishing meanwhile is no error
        containers = client.api.containers(all=True, filters={"label": label_filter})
        for c in containers:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(c["Id"], force=True, v=True)
        networks = client.networks.list(filters={"label": label_filter})
        for net in networks:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):  # an endpoint still attached
                net.remove()  # (the next sweep gets it)
        removed_c += len(containers)
        removed_n += len(networks)
        if containers or networks:
            quiet_since = time.monotonic()
        if time.monotonic() - quiet_since >= settle_s:
            return removed_c, removed_n
        time.sleep(0.25)


def down_all() -> tuple[int, int]:
    """Remove every container and network any chaos cluster made (images stay)."""
    from harness.provision.state import all_states

    counts = _remove(_client(), LABEL)
    for st in all_states():
        loaded = st.load()
        if loaded is None or loaded[0] == "docker":
            st.remove()
    return counts
