"""`chaos cluster` through the real console script: bad input, Ctrl-C during up, down --all, ssh provisioner."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import docker
import pytest

from tests.conftest import CHAOS, run_chaos

LABEL = "chaos.cluster"


def _labelled(name: str) -> tuple[int, int]:
    c = docker.from_env()
    flt = {"label": f"{LABEL}={name}"}
    return len(c.api.containers(all=True, filters=flt)), len(c.api.networks(filters=flt))


def test_bad_inputs_give_one_sentence_and_nonzero_exit(chaos_home: Path, tmp_path: Path) -> None:
    res = run_chaos("cluster", "up", "--nodes", "0", "--name", "badinput")
    assert res.returncode >= 3 and "--nodes must be at least 1" in res.stderr
    res = run_chaos("cluster", "up", "--provisioner", "nope", "--name", "badinput")
    assert res.returncode >= 3 and "unknown provisioner 'nope'" in res.stderr
    res = run_chaos("cluster", "exec", "--name", "not-up", "n2", "--", "true")
    assert res.returncode >= 3 and "is not up" in res.stderr
    for out in (res.stderr,):
        assert "Traceback" not in out


@pytest.mark.docker
def test_exec_on_unknown_node_and_status(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    res = run_chaos("cluster", "exec", "--name", docker_cluster.name, "n7", "--", "true")
    assert res.returncode >= 3
    assert "no node 'n7'" in res.stderr and "Traceback" not in res.stderr
    res = run_chaos("cluster", "exec", "--name", docker_cluster.name, "n2", "--", "hostname")
    assert res.returncode == 0 and res.stdout.strip() == "n2"
    res = run_chaos("cluster", "exec", "--name", docker_cluster.name, "n2", "--", "exit 7")
    assert res.returncode == 7
    res = run_chaos("cluster", "status", "--name", docker_cluster.name)
    assert res.returncode == 0 and "n3" in res.stdout and "up" in res.stdout


@pytest.mark.docker
def test_ssh_provisioner_against_docker_nodes(docker_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from harness.provision.state import ClusterState

    st = ClusterState(docker_cluster.name)
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"{n.name} {n.ip}\n" for n in docker_cluster.nodes))
    res = run_chaos("cluster", "up", "--provisioner", "ssh", "--name", "sshprov", "--hosts", str(hosts),
                    "--key", str(st.key_path), "--known-hosts", str(st.known_hosts), "--nodes", "3")
    assert res.returncode == 0, res.stderr
    res = run_chaos("cluster", "exec", "--name", "sshprov", "n3", "--", "hostname")
    assert res.stdout.strip() == "n3"
    assert run_chaos("cluster", "down", "--name", "sshprov").returncode == 0
    # an unreachable host is named, with a non-zero exit (port 1 on loopback refuses at once)
    hosts.write_text(f"n1 {docker_cluster.nodes[0].ip}\nn2 127.0.0.1:1\n")
    res = run_chaos("cluster", "up", "--provisioner", "ssh", "--name", "sshbad", "--hosts", str(hosts),
                    "--key", str(st.key_path), "--known-hosts", str(st.known_hosts))
    assert res.returncode >= 3
    assert "unreachable" in res.stderr and "n2" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.docker
def test_sigint_during_up_leaves_nothing_behind(chaos_home: Path) -> None:
    name = f"sigint-{os.getpid()}"
    proc = subprocess.Popen([CHAOS, "cluster", "up", "--nodes", "3", "--name", name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _labelled(name)[0] < 1 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "up finished before we could interrupt it"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "interrupted" in err
    assert _labelled(name) == (0, 0)


@pytest.mark.docker
def test_down_all_removes_every_labelled_object(chaos_home: Path) -> None:
    name = f"downall-{os.getpid()}"
    res = run_chaos("cluster", "up", "--nodes", "2", "--name", name)
    assert res.returncode == 0, res.stderr
    assert _labelled(name) == (2, 1)
    res = run_chaos("cluster", "down", "--all")
    assert res.returncode == 0, res.stderr
    c = docker.from_env()
    assert c.containers.list(all=True, filters={"label": LABEL}) == []
    assert c.networks.list(filters={"label": LABEL}) == []
    assert c.images.list(filters={"label": "chaos.image=node"}), "down --all must keep the node image"
