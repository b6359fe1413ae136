"""Tansu 0.6.0 (crates.io) on real containers, through the whole harness: its deployment (one broker
on the first node, its SQLite store on that node's FUSE disk, its clock libfaketime's) and a short run
under kills that ends in a verdict with its plots and report.

Tansu is built with cargo once per machine (`make tansu`; `make test` builds it when missing). The
unit twin (declaration, refusals before anything is built) is `tests/foundation/test_tansu_system.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from tests.conftest import run_chaos
from tests.db.test_process_system import _leftovers

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "pytest-tansu"
ARGS = ["--system", "tansu", "--nodes", "3", "--concurrency", "4", "--rate", "50", "--partitions", "2",
        "--no-progress", "--cluster", CLUSTER]


def _exec(container: str, cmd: str) -> str:
    client = docker.from_env()
    try:
        out = client.containers.get(container).exec_run(["sh", "-c", cmd])
        return str(out.output.decode(errors="replace"))
    finally:
        client.close()


def _containers() -> dict[str, str]:
    """Node name -> container name, from the containers' labels."""
    client = docker.from_env()
    try:
        found = client.containers.list(filters={"label": f"chaos.cluster={CLUSTER}"})
        return {c.labels.get("chaos.node", c.name): c.name for c in found}
    finally:
        client.close()


def test_a_short_run_under_kills_gives_a_verdict_and_the_deployment_is_as_declared(
        chaos_home: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    try:
        res = run_chaos("run", *ARGS, "--time-limit", "25", "--nemesis", "kill", "--nemesis-interval", "5",
                        "--seed", "5", "--store", str(store), "--leave-running", timeout=1500)
        [run_dir] = sorted(p for p in (store / "queue").iterdir() if p.is_dir())
        results = json.loads((run_dir / "results.json").read_text())
        test = json.loads((run_dir / "test.json").read_text())
        assert res.returncode in (0, 1), f"exit {res.returncode}: {res.stderr[-2500:]}"
        assert res.returncode == (0 if results["valid"] is True else 1)
        assert test["config"]["system"] == "tansu" and test["system"]["name"] == "tansu"
        assert set(results["not_checked"]) >= {"divergent-replicas", "coverage"}
        ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
        kills = [o for o in ops if o["process"] == "nemesis" and o["f"] == "start-kill"]
        assert kills and all(o["value"]["nodes"] == ["n1"] for o in kills if "nodes" in o["value"]), kills
        assert sum(1 for o in ops if o["type"] == "ok" and o["f"] == "send") > 50
        assert (run_dir / "nodes" / "n1" / "tansu.log").is_file() and (run_dir / "report.html").is_file()
        assert any((run_dir / "plots").glob("*.png")) if (run_dir / "plots").is_dir() else True

        # the deployment, left running: the broker on n1 only, its store on the FUSE disk, in WAL mode
        nodes = _containers()
        assert set(nodes) >= {"n1", "n2", "n3"}, nodes
        assert "tansu broker" in _exec(nodes["n1"], "ps -eo args")
        for n in ("n2", "n3"):
            assert "tansu" not in _exec(nodes[n], "ps -eo args"), f"{n} runs a broker it should not"
        assert "/var/lib/tansu" in _exec(nodes["n1"], "grep fuse /proc/mounts")
        assert "tansu.db-wal" in _exec(nodes["n1"], "ls /var/lib/tansu")
        pid = _exec(nodes["n1"], "cat /run/chaos/tansu.pid").strip()
        assert "libfaketime" in _exec(nodes["n1"], f"tr '\\0' '\\n' < /proc/{pid}/environ"), "not under libfaketime"
    finally:
        run_chaos("cluster", "down", "--name", CLUSTER, timeout=300)
    assert not _leftovers(CLUSTER)


def test_a_file_that_claims_transactions_is_refused_by_what_the_brokers_advertise(
        chaos_home: Path, tmp_path: Path) -> None:
    """Tansu's own file as a user might write it, claiming `transactions`: the preflight lets `--txn`
    through, the brokers are asked (ApiVersions) once they run, and the run is refused in one sentence
    (exit 3) naming what they do not advertise; the deployment is torn down."""
    from harness.registry import system_image
    from harness.systems import get_system

    image = system_image(get_system("tansu"))
    src = (ROOT / "harness" / "systems" / "tansu" / "sqlite.toml").read_text()
    claims = src.replace('features = ["consumer-groups", "idempotence"]',
                         f'features = ["consumer-groups", "idempotence", "transactions"]\nimage = "{image}"')
    claims = claims.replace('name = "tansu"', 'name = "tansu-claims-txn"')
    assert "transactions" in claims and image
    path = tmp_path / "claims.toml"
    path.write_text(claims)
    res = run_chaos("run", f"--system=process:{path}", "--nodes", "1", "--replication-factor", "1", "--min-insync",
                    "1", "--txn", "--time-limit", "5", "--nemesis", "", "--no-progress", "--cluster", CLUSTER,
                    "--store", str(tmp_path / "store"), timeout=600)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 3, res.stderr[-2000:]
    assert "system tansu-claims-txn cannot serve this workload: it needs transactions, and its brokers do not " \
           "advertise EndTxn (ApiVersions)" in lines[-1], lines[-1]
    assert not _leftovers(CLUSTER)
