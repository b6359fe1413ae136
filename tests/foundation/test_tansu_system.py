"""Tansu as a system under test, without containers: what it declares, what it refuses before
anything is built or provisioned, and what a failed build says. The container twin (deployment, a
run with kills) is `tests/db/test_tansu_in_containers.py`."""

from __future__ import annotations

import os
from pathlib import Path

import docker

from harness.registry import kind_refusals
from harness.systems import get_system
from harness.systems.process.config import load
from kernel.errors import UsageError
from kernel.system import placed
from tests.conftest import run_chaos

ROOT = Path(__file__).resolve().parents[2]


def _containers(cluster: str) -> list[str]:
    client = docker.from_env()
    try:
        return [c.name for c in client.containers.list(all=True, filters={"label": f"chaos.cluster={cluster}"})]
    finally:
        client.close()


def test_tansu_declares_one_broker_on_the_first_node_without_a_controller_or_transactions() -> None:
    s = get_system("tansu")
    [proc] = s.decl.processes
    assert s.name == "tansu" and proc.placement == "first"
    assert s.decl.hosts("broker", ["n1", "n2", "n3"]) == ["n1"]
    assert s.decl.process("controller") is None and s.decl.process("metadata-store") is None
    assert "transactions" not in s.decl.features and {"consumer-groups", "idempotence"} <= s.decl.features
    assert {"kill", "pause", "clock", "lose-unfsynced", "disk-loss", "client-net"} == set(proc.capabilities)
    assert not s.decl.extras  # no replica dumps, coverage or bug switches: the report says not checked


def test_tansu_takes_faults_by_role_and_refuses_the_rest() -> None:
    refused = kind_refusals("tansu")
    for kind in ("kill-controller", "pause-zookeeper", "partition-halves", "partition-zookeeper", "isolate-zookeeper"):
        assert kind in refused, kind
    assert "system tansu cannot act out nemesis kill-controller: it has no controller process" in refused[
        "kill-controller"]
    for kind in ("kill-one", "kill-leader", "pause-one", "clock-bump", "lose-unfsynced-one", "power-loss-all",
                 "client-partition-one", "client-partition-leader"):
        assert kind not in refused, (kind, refused.get(kind))


def test_placement_says_which_nodes_run_a_process(tmp_path: Path) -> None:
    assert [i for i in range(4) if placed("first", i)] == [0]
    assert [i for i in range(4) if placed("rest", i)] == [1, 2, 3]
    assert [i for i in range(4) if placed("all", i)] == [0, 1, 2, 3]
    text = (ROOT / "harness/systems/tansu/sqlite.toml").read_text().replace('nodes = "first"', 'nodes = "second"')
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    try:
        load(bad)
    except UsageError as e:
        line = 1 + text.splitlines().index('nodes = "second"')
        assert f"{bad}:{line}: nodes in [[process]] #1 must be one of all, first, rest" in str(e)
    else:
        raise AssertionError("a placement that is not all, first or rest was accepted")


def test_txn_and_a_fault_it_cannot_take_are_refused_before_anything_is_built(tmp_path: Path) -> None:
    """Refused in one sentence with exit 3, before tansu is built (an empty cache: a build would take
    minutes) and before any container exists."""
    env = {"CHAOS_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    for args, said in [(["--txn"], "system tansu does not serve transactions"),
                        (["--nemesis", "kill-controller"], "system tansu cannot act out nemesis kill-controller"),
                        (["--nemesis", "partition-halves"], "it has no broker process the harness can cut off from "
                                                            "its peers")]:
        res = run_chaos("run", "--system", "tansu", "--nodes", "3", "--time-limit", "5", "--cluster", "pytest-tansu-no",
                        "--store", str(tmp_path / "store"), *args, env=env, timeout=120)
        assert res.returncode == 3, (args, res.returncode, res.stderr[-800:])
        assert said in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "cache").exists() and not _containers("pytest-tansu-no")


def test_a_version_that_does_not_build_names_its_log(tmp_path: Path) -> None:
    """A build that fails is one sentence naming the build's log, exit 6 (crates.io answers at once
    that there is no such version)."""
    res = run_chaos("systems", "tansu", "--build", "--system-version", "0.0.999",
                    env={"CHAOS_CACHE": str(tmp_path / "cache")}, timeout=300)
    assert res.returncode == 6, (res.returncode, res.stderr[-800:])
    assert "building tansu 0.0.999 with cargo failed" in res.stderr and "tansu-0.0.999.log" in res.stderr


def test_no_cargo_is_one_sentence(tmp_path: Path) -> None:
    env = {"CHAOS_CACHE": str(tmp_path / "cache"), "PATH": os.path.dirname(os.environ.get("PYTHON", "/usr/bin/x")),
           "HOME": str(tmp_path)}
    res = run_chaos("systems", "tansu", "--build", env=env, timeout=120)
    assert res.returncode == 6, (res.returncode, res.stderr[-800:])
    assert "cargo is not installed" in res.stderr


def test_system_version_is_only_for_a_system_built_from_its_registry() -> None:
    try:
        get_system("logbroker", "1.0")
    except UsageError as e:
        assert "--system-version is for a system built from its registry" in str(e)
    else:
        raise AssertionError("--system-version was accepted for our broker")
