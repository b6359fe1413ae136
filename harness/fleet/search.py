"""The driver's side of `chaos sim-search --spark-master URL`: seeds as Spark tasks.

- Seeds go out in waves, one Spark job per wave (`parallelize(tasks, one slice per seed)
  .mapPartitions(run_partition)`), one seed per task so a lost executor costs the seeds it held and
  nothing more; two waves are in flight, so the executors never wait for the driver between them.
- Each task returns a small row (`tasks.run_task`); the driver keeps one row per seed (a retried
  task's second row is dropped and counted) and checks that every seed of the wave came back.
- Rows are taken in seed order, so the first failing seed is the smallest, as with `--jobs`; with
  `keep_going` every seed of the range runs and each one's verdict is reported.
- Failing seeds' run directories stay under the work directory the driver names
  (STORE/sim-fleet/<stamp>/seed-N: a path every executor can write, i.e. shared on a multi-host
  cluster); clean ones stay only until the batch check (`spark_judge`, the same Spark session)
  has judged them, exactly as the one-host search does.
- A found seed is shrunk with its candidate schedules as tasks (`shrink.shrink_fanout`).
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.fleet.progress import SearchProgress, live_search
from harness.fleet.shrink import shrink_fanout
from harness.fleet.tasks import FAIL_ONCE_ENV, SeedTask, TaskConfig, run_partition
from harness.sim_search import BATCH_BYTES, Found, SearchOutcome, _run_bytes, seed_spec, spark_judge
from kernel.nemesis import PlannedFault
from kernel.spec import RunSpec

#: seeds per Spark job, per core of the cluster: enough that a job's start costs little per seed
WAVE_PER_CORE = 4


#: a search's executor JVMs only hand seeds to Python workers and rows back: the serial collector and
#: C1 alone leave the cores to the simulators (C2's compiler threads and a parallel collector's threads
#: competed with them while every executor started, and bought nothing for so little JVM work)
EXECUTOR_JAVA = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


@dataclass
class FleetOutcome(SearchOutcome):
    duplicates: int = 0  # rows of retried tasks the driver dropped (the seed was counted once)
    work_dir: str = ""
    cores: int = 0
    hosts: set[str] = field(default_factory=set)


def fleet_spark(master: str | None) -> Any:
    """The process's Spark session, with executors running this very Python (local[*] shares the
    driver's venv; a standalone cluster's workers must have the same venv at the same path, or
    PYSPARK_PYTHON/spark.pyspark.python naming theirs)."""
    if master is None or master.startswith("local"):
        # local executors are this machine: only this venv's Python can import the project (an inherited
        # PYSPARK_PYTHON=python3 sent the tasks to an interpreter without our packages)
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from results.spark import get_spark

    return get_spark(master, executor_java=EXECUTOR_JAVA)


def run_tasks(spark: Any, tasks: list[SeedTask], cfg: TaskConfig) -> tuple[list[dict[str, Any]], int]:
    """One Spark job, one task per `SeedTask`: one row per key, in the tasks' order, and how many
    duplicate rows were dropped. A key with no row is a harness bug (Spark lost a task's result)."""
    if not tasks:
        return [], 0
    rdd = spark.sparkContext.parallelize(tasks, len(tasks))
    rows: dict[str, dict[str, Any]] = {}
    dup = 0
    for row in rdd.mapPartitions(functools.partial(run_partition, cfg=cfg)).collect():
        if row["key"] in rows:
            dup += 1
            continue
        rows[row["key"]] = row
    missing = [t.key for t in tasks if t.key not in rows]
    if missing:
        raise RuntimeError(f"harness bug: the Spark job returned no result for {', '.join(missing[:5])}")
    return [rows[t.key] for t in tasks], dup


def _waves(first: int, size: int, max_seeds: int | None) -> Iterator[range]:
    seed = first
    while max_seeds is None or seed < first + max_seeds:
        end = seed + size if max_seeds is None else min(seed + size, first + max_seeds)
        yield range(seed, end)
        seed = end


def fleet_search(base: RunSpec, *, first_seed: int, budget_s: float, spark_master: str | None,
                 say: Callable[[str], None], work_dir: Path, max_seeds: int | None = None,
                 shrink_found: bool = True, check_batch: int = 32, rates: tuple[float, ...] = (),
                 keep_going: bool = False, on_seed: Callable[[dict[str, Any]], None] | None = None,
                 progress: bool = False, wave: int | None = None) -> FleetOutcome:
    """`harness.sim_search.search`, its seeds run as Spark tasks (see the module's docstring)."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    out = FleetOutcome(work_dir=str(work_dir))
    spark = fleet_spark(spark_master)
    out.cores = int(spark.sparkContext.defaultParallelism)
    size = wave or max(1, out.cores * WAVE_PER_CORE)
    cfg = TaskConfig(str(work_dir), keep_clean=check_batch > 0, fail_once=os.environ.get(FAIL_ONCE_ENV))
    shown = SearchProgress(budget_s, max_seeds)
    pending: list[dict[str, Any]] = []
    pending_bytes = 0
    failing: set[int] = set()

    def note_found(row: dict[str, Any], bad: dict[str, int], judge: str) -> None:
        failing.add(row["seed"])
        shown.failures = len(failing)
        if out.found is None or row["seed"] < out.found.seed:
            out.found = Found(row["seed"], bad, [PlannedFault.from_json(f) for f in row["faults"]], row["wall_s"],
                              judge=judge)
            out.time_to_detect_s = time.monotonic() - t0

    def judge_pending() -> None:
        nonlocal pending_bytes
        if not pending:
            return
        shown.phase = "checking"
        verdicts = spark_judge([p["run_dir"] for p in pending], spark_master, say)
        out.spark_batches += 1
        out.spark_checked += sum(v is not None for v in verdicts)
        shown.checked = out.spark_checked
        for row, bad in zip(pending, verdicts, strict=True):
            if bad:
                note_found(row, bad, "spark")
                if on_seed is not None:
                    on_seed({**row, "checked": bad})
            else:
                shutil.rmtree(row["kept"], ignore_errors=True)
        pending.clear()
        pending_bytes = 0
        shown.phase = "simulating"

    def take(row: dict[str, Any]) -> None:
        nonlocal pending_bytes
        out.seeds += 1
        out.sim_seconds += row["sim_seconds"]
        out.hosts.add(row["host"])
        for p in row.get("probes", {}):  # coverage, as the local search records it (seeds in order)
            out.first_hit.setdefault(p, out.seeds)
            out.hits[p] = out.hits.get(p, 0) + 1
        shown.seeds = out.seeds
        if on_seed is not None:
            on_seed(row)
        if row["screened"]:
            note_found(row, row["screened"], "screen")
        elif row["run_dir"] is not None:
            pending.append(row)
            pending_bytes += _run_bytes(Path(row["run_dir"]))

    def one_wave(seeds: range) -> tuple[list[dict[str, Any]], int]:
        tasks = [SeedTask(f"seed-{s}", seed_spec(base, s, rates).to_json()) for s in seeds]
        return run_tasks(spark, tasks, cfg)

    with live_search(shown, enabled=progress), cf.ThreadPoolExecutor(max_workers=2) as pool:
        waves = _waves(first_seed, size, max_seeds)
        inflight: list[cf.Future[tuple[list[dict[str, Any]], int]]] = []

        def more() -> bool:
            return time.monotonic() < deadline and (keep_going or out.found is None)

        for seeds in waves:
            inflight.append(pool.submit(one_wave, seeds))
            if len(inflight) < 2:
                continue
            rows, dup = inflight.pop(0).result()
            out.duplicates += dup
            for row in rows:
                take(row)
            say(f"{out.seeds} seeds, {out.sim_seconds:.0f} simulated s in {time.monotonic() - t0:.1f} s on "
                f"{out.cores} Spark cores" + (f"; seed {out.found.seed} fails: {out.found.anomalies}"
                                               if out.found else ""))
            if len(pending) >= check_batch > 0 or pending_bytes >= BATCH_BYTES or out.found is not None:
                judge_pending()
            if not more():
                break
        for fut in inflight:  # the wave still in flight: its seeds ran, so they count
            rows, dup = fut.result()
            out.duplicates += dup
            for row in rows:
                take(row)
        judge_pending()
    for row in pending:
        shutil.rmtree(row["kept"], ignore_errors=True)
    for staging in work_dir.glob(".seed-*"):  # what attempts that died mid-task left behind
        shutil.rmtree(staging, ignore_errors=True)
    if out.found is not None and shrink_found:
        spec = seed_spec(base, out.found.seed, rates)
        fails = _fails_many(spark, cfg, spark_master, out.found.judge == "spark")
        out.shrunk, out.shrink_steps = shrink_fanout(spec, out.found.faults, deadline + budget_s, say, fails,
                                                     width=out.cores)
    out.wall_s = time.monotonic() - t0
    return out


def _fails_many(spark: Any, cfg: TaskConfig, spark_master: str | None,
                by_spark: bool) -> Callable[[RunSpec, list[list[PlannedFault]]], list[bool]]:
    """Candidate schedules of one seed as one Spark job: whether each still fails, by the judge that
    found the seed (the screen; or the screen, then the batch check of the runs it passed)."""
    counter = iter(range(1, 1 << 62))
    shrink_dir = Path(cfg.work_dir) / "shrink"
    shrink_cfg = TaskConfig(str(shrink_dir), keep_clean=by_spark)

    def fails(spec: RunSpec, cands: list[list[PlannedFault]]) -> list[bool]:
        tasks = [SeedTask(f"cand-{next(counter)}", spec.to_json(), [f.to_json() for f in c]) for c in cands]
        try:
            rows, _ = run_tasks(spark, tasks, shrink_cfg)
            res = [bool(r["screened"]) for r in rows]
            unjudged = [i for i, r in enumerate(rows) if not r["screened"] and r["run_dir"]]
            if by_spark and unjudged:
                for i, bad in zip(unjudged, spark_judge([rows[i]["run_dir"] for i in unjudged], spark_master),
                                  strict=True):
                    res[i] = bool(bad)
            return res
        finally:
            shutil.rmtree(shrink_dir, ignore_errors=True)
    return fails
