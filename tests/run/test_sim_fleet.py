"""`chaos sim-search --spark-master`: seeds as Spark tasks give the per-seed verdicts `--jobs` gives;
a crashed Python worker's task is retried without losing or double-counting its seed; the batch
check judges the kept runs; the fanned-out shrinker reaches the sequential shrinker's schedule."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.fleet.search import fleet_search
from harness.fleet.shrink import shrink_fanout
from harness.fleet.tasks import FAIL_ONCE_ENV
from harness.registry import build_test
from harness.sim_search import shrink
from kernel.nemesis import PlannedFault
from kernel.spec import RunSpec, build_spec

CHAOS = str(Path(sys.executable).parent / "chaos")
#: a bug the simulator finds on some seeds of a short run and not on others: both verdicts occur
SEARCH = ["--bug", "truncate-to-hw", "--nemesis", "kill", "--nemesis-interval", "2", "--time-limit", "6",
          "--rate", "100", "--first-seed", "1", "--max-seeds", "8", "--check-batch", "0", "--keep-going",
          "--budget", "5m", "--no-check", "--no-shrink"]


def _verdicts(tmp: Path, *how: str, env: dict[str, str] | None = None) -> tuple[dict[int, dict[str, Any]], str]:
    """Each seed's line of the verdict file: its screen's anomalies and the coverage probes it hit."""
    out = subprocess.run([CHAOS, "sim-search", *SEARCH, *how, "--store", str(tmp / "store"),
                          "--verdicts", str(tmp / "verdicts.jsonl")],
                         capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
    assert out.returncode in (0, 1), out.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp / "verdicts.jsonl").read_text().splitlines()]
    return {r.pop("seed"): r for r in rows}, out.stderr


@pytest.fixture(scope="module")
def by_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    verdicts, _ = _verdicts(tmp_path_factory.mktemp("jobs"), "--jobs", "2")
    assert sorted(verdicts) == list(range(1, 9))
    screened = [v["screened"] for v in verdicts.values()]
    assert any(screened) and not all(screened), verdicts  # both verdicts occur
    assert all(v["probes"] for v in verdicts.values())  # every seed's coverage is in its line
    return verdicts


@pytest.mark.spark
@pytest.mark.slow
def test_spark_tasks_give_the_verdicts_of_jobs(tmp_path: Path, by_jobs: dict[int, dict[str, Any]]) -> None:
    # an inherited PYSPARK_PYTHON naming another interpreter (CI's pytest process had set one) must not
    # send a local executor's tasks to a Python without the project
    verdicts, err = _verdicts(tmp_path, "--spark-master", "local[2]", env={"PYSPARK_PYTHON": "python3"})
    assert verdicts == by_jobs
    assert "0 retried task result(s) dropped" in err, err[-2000:]
    assert "coverage: 0 probes hit" not in err and "probes hit" in err  # the executors' probe counts came back
    kept = sorted(p.name for p in (tmp_path / "store" / "sim-fleet").glob("*/seed-*"))
    assert kept == sorted(f"seed-{s}" for s, v in by_jobs.items() if v["screened"])  # failing seeds' runs, once each
    for d in (tmp_path / "store" / "sim-fleet").glob("*/seed-*"):
        assert len(list(d.rglob("history.jsonl"))) == 1 and list(d.rglob("replicas"))


@pytest.mark.spark
@pytest.mark.slow
def test_a_crashed_worker_is_retried_and_its_seed_counted_once(tmp_path: Path,
                                                               by_jobs: dict[int, dict[str, Any]]) -> None:
    seed = min(s for s, v in by_jobs.items() if v["screened"])  # crashes after its failing run was kept
    marker = tmp_path / "crashed-once"
    verdicts, err = _verdicts(tmp_path, "--spark-master", "local[2,3]",
                              env={FAIL_ONCE_ENV: f"{marker}:{seed}"})
    assert marker.exists()  # the worker did die once
    assert verdicts == by_jobs
    assert "8 seeds" in err, err[-2000:]
    [work] = (tmp_path / "store" / "sim-fleet").iterdir()
    assert sorted(p.name for p in work.iterdir()) == sorted(f"seed-{s}" for s, v in by_jobs.items() if v["screened"])
    assert len(list((work / f"seed-{seed}").rglob("history.jsonl"))) == 1  # replaced, not added to


@pytest.mark.spark
@pytest.mark.slow
def test_kept_runs_are_judged_by_the_batch_check(tmp_path: Path) -> None:
    base = build_test(build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 5.0, "rate": 20.0,
                                  "nemesis": "kill", "nemesis_interval": 3.0})).spec
    out = fleet_search(base, first_seed=1, budget_s=600, spark_master="local[2]", say=lambda _: None,
                       work_dir=tmp_path / "work", max_seeds=4, check_batch=2, wave=2)
    assert out.found is None, out.found
    assert (out.seeds, out.spark_checked, out.duplicates) == (4, 4, 0)
    assert out.spark_batches >= 2
    assert list((tmp_path / "work").iterdir()) == []  # clean runs removed once judged


def _schedule(rng: random.Random) -> list[PlannedFault]:
    return [PlannedFault(i, "kill", "leader", round(rng.uniform(0, 20), 3), round(rng.uniform(0.2, 12), 3))
            for i in range(rng.randint(1, 7))]


def _judge(need: set[int], min_dur: float, max_at: float) -> Callable[[RunSpec, list[PlannedFault]], bool]:
    """Fails while every needed fault is there, long enough and early enough."""
    def fails(_: RunSpec, cand: list[PlannedFault]) -> bool:
        have = {f.id: f for f in cand}
        return need <= set(have) and all(have[i].duration_s >= min_dur and have[i].at_s <= max_at for i in need)
    return fails


def test_the_fanned_out_shrinker_reaches_the_sequential_result() -> None:
    """Against judges that fail on some property of the schedule (random ones), the sequential
    shrinker and the fan-out at several widths end at the same schedule after the same steps."""
    spec = RunSpec(time_limit=30.0)
    for trial in range(200):
        rng = random.Random(trial)
        faults = _schedule(rng)
        fails = _judge({f.id for f in faults if rng.random() < 0.4}, rng.uniform(0, 3), rng.uniform(5, 30))
        if not fails(spec, faults):
            continue
        want = shrink(spec, faults, float("inf"), lambda _: None, fails)
        for width in (1, 2, 3, 8):
            got = shrink_fanout(spec, faults, float("inf"), lambda _: None,
                                lambda s, cands, f=fails: [f(s, c) for c in cands], width)
            assert got == want, (trial, width)
