"""What a Spark executor does with a seed: simulate it, screen it, return a small row, and leave
its run directory (history, replica dumps, test.json) under the driver's work directory, keyed.

Spark may run a task more than once: a lost executor, a crashed Python worker, `maxFailures`
retries. Everything a task leaves is therefore written idempotently under its key (`seed-17`,
`cand-3`): an earlier attempt's directory is replaced whole, never added to, so a seed has one run
directory however often it ran, and the driver keeps one row per key (`search.py`).

Executors import this module by name, so the project must be importable where they run: in
`local[*]` they are the driver's own Python; on a standalone cluster every worker must run the same
virtualenv (`spark.pyspark.python` / `PYSPARK_PYTHON`, and the same checkout at the same path):
nothing is shipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.sim_search import simulate_and_screen

#: test-only: "MARKER:SEED" makes the Python worker that takes SEED exit at once, the first time only
#: (MARKER is created then): a crashed worker whose task Spark must retry without losing the seed
FAIL_ONCE_ENV = "CHAOS_FLEET_FAIL_ONCE"


@dataclass(frozen=True)
class SeedTask:
    """One simulation to run: a seed's spec, the schedule to play instead of its own (shrinking), and
    the key its result and run directory are stored under."""

    key: str
    spec: dict[str, Any]
    faults: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class TaskConfig:
    """What every task of a job shares: where runs go (a path every executor can write, shared on a
    multi-host cluster), whether clean runs are kept (for the driver's batch check), the injection."""

    work_dir: str
    keep_clean: bool
    fail_once: str | None = None


def _fail_once(cfg: TaskConfig, seed: int) -> None:
    if not cfg.fail_once:
        return
    marker, _, which = cfg.fail_once.rpartition(":")
    if str(seed) != which:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os._exit(17)  # the Python worker dies mid-task, as a killed one does


def _keep(scratch: Path, run_dir: Path, final: Path) -> Path:
    """Move a finished run's scratch store to `final`, replacing an earlier attempt's; the run
    directory's new path."""
    rel = run_dir.relative_to(scratch)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(scratch, final)
    return final / rel


def run_task(task: SeedTask, cfg: TaskConfig) -> dict[str, Any]:
    """One seed, as a row: key, seed, screened anomalies, simulated and wall seconds, its schedule,
    the run directory kept (a failing run always; a clean one for the batch check) and the host."""
    seed = int(task.spec["seed"])
    work = Path(cfg.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{task.key}-", dir=work)
    try:
        sim = simulate_and_screen(task.spec, task.faults, keep_in=staging)
        run_dir: str | None = None
        kept: str | None = None
        if sim.run_dir is not None and (sim.screened or cfg.keep_clean):
            scratch = Path(staging) / Path(sim.run_dir).relative_to(staging).parts[0]
            run_dir = str(_keep(scratch, Path(sim.run_dir), work / task.key))
            kept = str(work / task.key)
        _fail_once(cfg, seed)  # after the run was kept: the retry must replace it, not add to it
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {"key": task.key, "seed": sim.seed, "screened": sim.screened, "sim_seconds": sim.sim_seconds,
            "wall_s": sim.wall_s, "faults": sim.faults, "run_dir": run_dir, "kept": kept, "host": socket.gethostname(),
            "probes": sim.probes}


def run_partition(tasks: Iterable[SeedTask], cfg: TaskConfig) -> Iterator[dict[str, Any]]:
    """A Spark partition's tasks, one after another (mapPartitions)."""
    for task in tasks:
        yield run_task(task, cfg)
