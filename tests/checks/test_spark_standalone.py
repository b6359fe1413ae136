"""`chaos check --spark-master spark://…` on a real standalone Spark cluster: a master and one worker
started from the installed pyspark (`bin/spark-class …deploy.master.Master` / `…deploy.worker.Worker`),
bound to loopback, stopped afterwards whatever happens. The whole corpus, checked in one call there,
gets the same verdicts, anomaly types and counts as in one call on `local[2]`.
A `chaos sim-search` on the same cluster gives `--jobs 2`'s per-seed verdicts, its executors launched
with the search's JVM options.

Both checks run as `chaos check PATH...` subprocesses (one SparkSession per process, as a user runs
it), which also exercises the many-runs CLI: one results.json per run, a summary, the worst exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_chaos

CORPUS = Path(__file__).resolve().parent / "corpus"
pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"nothing listens on {port} after {timeout} s: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The master's URL, and the worker's directory (each executor's launch command and output)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp), "SPARK_WORKER_DIR": str(tmp / "work")}
    port, ui, wui = _free_port(), _free_port(), _free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def start(log: Path, *args: str) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            p = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

    try:
        master = start(tmp / "master.log", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                       "--port", str(port), "--webui-port", str(ui))
        _wait_for(port, master, tmp / "master.log")
        url = f"spark://127.0.0.1:{port}"
        worker = start(tmp / "worker.log", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                       "--cores", "1", "--memory", "1g", "--webui-port", str(wui), "--work-dir", str(tmp / "work"),
                       url)
        end = time.monotonic() + 120
        while "Successfully registered with master" not in (tmp / "worker.log").read_text():
            assert worker.poll() is None and time.monotonic() < end, (tmp / "worker.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url, tmp / "work"
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(30)


@pytest.fixture(scope="module")
def standalone(cluster: tuple[str, Path]) -> str:
    return cluster[0]


def _check_all(root: Path, master: str) -> tuple[int, str, dict[str, dict[str, object]]]:
    shutil.copytree(CORPUS, root)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    res = run_chaos("check", "--no-perf", "--elle-cli", "", "--spark-master", master, *map(str, runs), timeout=900)
    found = {}
    for r in runs:
        d = json.loads((r / "results.json").read_text())
        found[r.name] = {"valid": d["valid"], "bad": d["bad_error_types"],
                         "counts": {t: d[t]["count"] for t in d["error_types"]}}
    return res.returncode, res.stderr, found


def test_standalone_cluster_gives_the_same_verdicts_as_local(standalone: str, tmp_path: Path) -> None:
    code_local, err_local, local = _check_all(tmp_path / "local", "local[2]")
    code_cluster, err_cluster, cluster = _check_all(tmp_path / "cluster", standalone)
    assert cluster == local
    # invalid cases and two unknown (near-unseen-drain-gave-up, near-valid-drain-gave-up: drains that
    # gave up): the worst is 2
    assert sorted(n for n, d in local.items() if d["valid"] == "unknown") == [
        "near-unseen-drain-gave-up", "near-valid-drain-gave-up"]
    assert code_cluster == code_local == 2, err_cluster[-3000:]
    assert sum(1 for d in local.values() if d["valid"] is False) >= 10
    for err in (err_local, err_cluster):
        assert f"{len(local)} checked:" in err and "INVALID" in err and "VALID" in err


def test_a_search_on_the_cluster_runs_its_executors_light_and_gives_the_verdicts_of_jobs(
        cluster: tuple[str, Path], tmp_path: Path) -> None:
    """`chaos sim-search --spark-master spark://…`: the executors' JVMs run with the search's options
    (serial collector, C1 only: `harness.fleet.search.EXECUTOR_JAVA`, read from the worker's record
    of the command it launched), and every seed's verdict is the one `--jobs 2` gives."""
    from harness.fleet.search import EXECUTOR_JAVA

    assert EXECUTOR_JAVA  # the options this test looks for
    search = ["sim-search", "--bug", "truncate-to-hw", "--nemesis", "kill", "--nemesis-interval", "2",
              "--time-limit", "5", "--rate", "100", "--first-seed", "1", "--max-seeds", "4", "--check-batch", "0",
              "--keep-going", "--budget", "5m", "--no-check", "--no-shrink"]
    url, work = cluster
    verdicts = {}
    for how, args in (("jobs", ["--jobs", "2"]), ("cluster", ["--spark-master", url])):
        res = run_chaos(*search, *args, "--store", str(tmp_path / how), "--verdicts", str(tmp_path / f"{how}.jsonl"),
                        timeout=600)
        assert res.returncode in (0, 1), res.stderr[-3000:]
        verdicts[how] = [json.loads(x) for x in (tmp_path / f"{how}.jsonl").read_text().splitlines()]
    assert [v["seed"] for v in verdicts["cluster"]] == [1, 2, 3, 4]
    assert verdicts["cluster"] == verdicts["jobs"]
    launched = [p.read_text(errors="replace") for p in work.glob("app-*/*/stderr")]
    commands = [t.split("\n", 1)[0] for t in launched if t.startswith("Spark Executor Command")]
    assert commands and any(all(o in c for o in EXECUTOR_JAVA) for c in commands), commands[-1:]
