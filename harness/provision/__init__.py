"""Provisioners: where nodes come from (a part; the orchestrator reaches them through `get_provisioner`).

`docker` (default) creates containers from the node image on a labelled bridge network; `ssh`
uses hosts that already exist; `sim` runs the whole cluster inside the deterministic simulator
(`sim.py`, on `logsim`). Both hand out `Node` records and keep per-cluster state
(`state.ClusterState`: key pair, known_hosts, nodes.json) so later commands find the cluster again.
The Protocol they implement is `kernel.test.Provisioner`.
"""

from __future__ import annotations

from kernel.errors import UsageError
from kernel.test import Provisioner

PROVISIONERS = ("docker", "ssh", "sim")


def get_provisioner(kind: str, cluster: str = "chaos", **options: object) -> Provisioner:
    """The provisioner named `kind`; an unknown name is a UsageError naming the known ones."""
    if kind == "docker":
        from harness.provision.docker import DockerProvisioner

        return DockerProvisioner(cluster, **options)  # type: ignore[arg-type]
    if kind == "ssh":
        from harness.provision.ssh import SSHProvisioner

        return SSHProvisioner(cluster, **options)  # type: ignore[arg-type]
    if kind == "sim":
        from harness.provision.sim import SimProvisioner

        return SimProvisioner(cluster)
    raise UsageError(f"unknown provisioner {kind!r}; choose one of: {', '.join(PROVISIONERS)}")
