"""`chaos analyze` on a store of 24 runs: the table per configuration and night, checked against an
independent pandas computation from the same files, its Parquet/CSV/plots, and the same table from a
standalone Spark master and worker started from the installed pyspark.

The store is synthetic from real files (see README.md): 3 nights × 2 configurations × 4 runs, each a
copy of a real run's history, perf/ and replica dumps, with its own test.json and results.json.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from results.analyze import Analysis, analyze
from tests.results.conftest import INVALID, VALID

pytestmark = pytest.mark.spark

CHAOS = str(Path(sys.executable).parent / "chaos")
NIGHTS = ["2026-11-20", "2026-11-21", "2026-11-22"]
GOOD, BUGGY = "queue/kills/default", "hotkey/kills/canary"
INVALID_PER_NIGHT = {"2026-11-20": 4, "2026-11-21": 2, "2026-11-22": 0}


def _make_run(src: Path, dest: Path, night: str, cell: str, seed: int, invalid: bool) -> None:
    dest.mkdir(parents=True)
    for part in ("history.jsonl", "perf", "replicas"):
        (shutil.copytree if (src / part).is_dir() else shutil.copy)(src / part, dest / part)
    test = json.loads((src / "test.json").read_text())
    test["seed"] = seed
    test["config"]["name"] = dest.parent.name
    test["nightly"] = {"id": f"nightly-{night}", "night": night, "cell": cell}
    (dest / "test.json").write_text(json.dumps(test))
    results = json.loads((src / "results.json").read_text())
    if not invalid:
        for t in results["error_types"]:
            del results[t]
        results.update(valid=True, error_types=[], bad_error_types=[])
    (dest / "results.json").write_text(json.dumps(results))


@pytest.fixture(scope="module")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("analyze") / "store"
    seed = 0
    for night in NIGHTS:
        for i in range(4):
            seed += 1
            _make_run(VALID, store / "queue-kills-default" / f"{night.replace('-', '')}T0{i}0000-{seed}", night, GOOD,
                      seed, invalid=False)
            _make_run(INVALID, store / "hotkey-kills-canary" / f"{night.replace('-', '')}T0{i}0000-{seed}", night,
                      BUGGY, seed, invalid=i < INVALID_PER_NIGHT[night])
    # one run that crashed before its check: counted, no verdict, no perf
    crashed = store / "queue-kills-default" / "20261122T090000-99"
    crashed.mkdir()
    (crashed / "test.json").write_text(json.dumps({"seed": 99, "config": {"name": "queue-kills-default"},
                                                   "complete": False, "error": "boom",
                                                   "nightly": {"night": "2026-11-22", "cell": GOOD}}))
    return store


@pytest.fixture(scope="module")
def local(synthetic_store: Path) -> Analysis:
    return analyze(synthetic_store, synthetic_store / "analysis", "local[2]")


def expected_perf(src: Path, copies: int) -> dict[str, float]:
    """Availability and p99 inside/outside fault windows, computed with pandas from one real run's
    files repeated `copies` times (what pooling identical runs does)."""
    lat = pd.read_parquet(src / "perf" / "latency.parquet")
    ops = [json.loads(x) for x in (src / "history.jsonl").read_text().splitlines()]
    end = max(o["time"] for o in ops if o["process"] != "nemesis" and not o.get("final")) / 1e9
    lat = lat[lat["time_s"] <= end]
    t = lat["time_s"] - lat["latency_ms"] / 1000
    faults = json.loads((src / "perf" / "faults.json").read_text())
    inside = np.zeros(len(lat), dtype=bool)
    for w in faults:
        inside |= ((t >= w["start_s"]) & (t < (w["end_s"] if w["end_s"] is not None else np.inf))).to_numpy()
    out: dict[str, float] = {}
    for where, mask in (("in", inside), ("out", ~inside)):
        part = lat[mask]
        ok = part[part["type"] == "ok"]["latency_ms"].to_numpy()
        out[f"availability_{where}"] = round(float((part["type"] == "ok").mean()), 6)
        out[f"p99_ms_{where}"] = round(float(np.percentile(np.tile(ok, copies), 99)), 6)
    return out


def test_the_table_has_one_row_per_night_and_configuration(local: Analysis) -> None:
    t = local.table
    assert list(zip(t["night"], t["config"], strict=True)) == [(n, c) for n in NIGHTS for c in (BUGGY, GOOD)]
    assert int(t["runs"].sum()) == 25 and int(t["no_verdict"].sum()) == 1
    buggy = t[t["config"] == BUGGY].set_index("night")
    assert buggy["invalid"].to_dict() == INVALID_PER_NIGHT
    real = json.loads((INVALID / "results.json").read_text())
    for night, n in INVALID_PER_NIGHT.items():
        for kind in real["error_types"]:
            assert buggy.loc[night, f"anomaly:{kind}"] == n * real[kind]["count"]
    good = t[t["config"] == GOOD]
    assert (good["valid"] == 4).all() and (good[[c for c in t.columns if c.startswith("anomaly:")]] == 0).all().all()
    ops = sum(1 for x in (VALID / "history.jsonl").read_text().splitlines()
              if json.loads(x)["process"] != "nemesis" and json.loads(x)["type"] != "invoke")
    assert (good["ops"] == 4 * ops).all()


@pytest.mark.parametrize("config, src", [(GOOD, VALID), (BUGGY, INVALID)])
def test_availability_and_p99_inside_and_outside_fault_windows(local: Analysis, config: str, src: Path) -> None:
    want = expected_perf(src, copies=4)
    for _, row in local.table[local.table["config"] == config].iterrows():
        for k, v in want.items():
            assert row[k] == pytest.approx(v, abs=1e-6), (config, k)
    one = expected_perf(src, copies=1)
    runs = local.runs[(local.runs["config"] == config) & (local.runs["verdict"] != "crashed")]
    assert len(runs) == 12
    for _, row in runs.iterrows():
        for k, v in one.items():
            assert row[k] == pytest.approx(v, abs=1e-6), (config, k)
    assert want["availability_in"] < want["availability_out"]  # the faults hurt


def test_recovery_per_fault_kind(local: Analysis) -> None:
    t = local.table.set_index(["night", "config"])
    for config, src in ((GOOD, VALID), (BUGGY, INVALID)):
        by_kind: dict[str, list[float]] = {}
        for w in json.loads((src / "perf" / "faults.json").read_text()):
            if w["recovery_s"] is not None:
                kind = w["family"] if w["kind"] == w["family"] else f"{w['family']}-{w['kind']}"
                by_kind.setdefault(kind, []).append(w["recovery_s"])
        for kind, xs in by_kind.items():
            row = t.loc[(NIGHTS[0], config)]
            assert row[f"recovery_mean_s:{kind}"] == pytest.approx(sum(xs) / len(xs), abs=1e-6)
            assert row[f"recovery_max_s:{kind}"] == pytest.approx(max(xs), abs=1e-6)
    assert "recovery_max_s:kill-controller" in t.columns and "recovery_max_s:kill-leader" in t.columns


def test_parquet_csv_and_trend_plots(local: Analysis, synthetic_store: Path) -> None:
    import matplotlib.image as mpimg

    out = synthetic_store / "analysis"
    pq = pd.read_parquet(out / "analysis.parquet")
    csv = pd.read_csv(out / "analysis.csv")
    pd.testing.assert_frame_equal(pq.reset_index(drop=True), local.table.reset_index(drop=True))
    assert list(csv.columns) == list(local.table.columns) and len(csv) == 6
    assert len(pd.read_csv(out / "runs.csv")) == 25
    for name in ("trend-availability.png", "trend-p99.png", "trend-anomalies.png", "trend-recovery.png"):
        img = mpimg.imread(out / name)
        assert img.shape[:2] == (420, 1000) and img[..., :3].std() > 0.02, name
    assert 'id="analysis"' in (out / "index.html").read_text()


# --- a standalone Spark cluster: master and worker from the installed pyspark, on loopback -------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait(what: str, ok: Any, timeout: float, procs: list[subprocess.Popen[bytes]], logs: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(1)
    tails = "\n".join(f"{f.name}: {f.read_text()[-1500:]}" for f in sorted(logs.glob("*.log")))
    pytest.fail(f"the standalone Spark {what} did not come up in {timeout:.0f} s\n{tails}")


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-standalone")
    port, ui, wui = _free_port(), _free_port(), _free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "worker")}
    spark_class = str(home / "bin" / "spark-class")
    master_url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(work / "master.log", "wb") as mlog:
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                           "--port", str(port), "--webui-port", str(ui)], env=env, stdout=mlog,
                                          stderr=subprocess.STDOUT, start_new_session=True))

        def master_json() -> dict[str, Any]:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                d: dict[str, Any] = json.loads(r.read())
                return d

        _wait("master", lambda: master_json().get("status") == "ALIVE", 120, procs, work)
        with open(work / "worker.log", "wb") as wlog:
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", master_url,
                                           "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                                           "--webui-port", str(wui), "--work-dir", str(work / "worker")],
                                          env=env, stdout=wlog, stderr=subprocess.STDOUT, start_new_session=True))
        _wait("worker", lambda: any(w.get("state") == "ALIVE" for w in master_json().get("workers", [])), 120,
              procs, work)
        yield master_url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


@pytest.mark.slow
def test_the_same_table_on_a_standalone_spark_cluster(local: Analysis, synthetic_store: Path,
                                                      spark_cluster: str) -> None:
    out = synthetic_store / "analysis-standalone"
    r = subprocess.run([CHAOS, "analyze", str(synthetic_store), "--spark-master", spark_cluster, "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "analysis.csv").read_text() == (synthetic_store / "analysis" / "analysis.csv").read_text()
    assert (out / "runs.csv").read_text() == (synthetic_store / "analysis" / "runs.csv").read_text()
    assert f"Spark master {spark_cluster}" in (out / "index.html").read_text()
