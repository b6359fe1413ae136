"""`chaos sim-search`: simulate seeds in parallel processes until one fails, shrink its fault
schedule, and save the smallest failing run as a normal run directory with its check and report.

- Seeds `first, first+1, ...` are simulated by a pool of worker processes (one per core by
  default), each into a scratch directory, and screened there (`sim_screen.py`: plain Python, no
  Spark); results come back in batches of one per worker.
- The first seed whose screen finds loss or divergence is shrunk: with its seed fixed (so the
  workload and the simulator's choices stay what they were), its schedule is made smaller while
  the screen still fails — drop one fault at a time, then halve each fault's duration, then start
  each fault later — one candidate at a time, each a fresh simulation.
- The smallest failing schedule is simulated once more into the store as a normal run
  (`test.json` keeps the schedule and `"schedule_shrunk": true`, so `chaos replay` reproduces it
  byte for byte), and checked by the real checker; its report says the rest.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.provision.sim import simulate
from harness.provision.sim_screen import screen
from kernel.nemesis import PlannedFault
from kernel.node import node_names
from kernel.spec import RunSpec, build_spec


@dataclass
class Found:
    seed: int
    anomalies: dict[str, int]
    faults: list[PlannedFault]
    wall_s: float


@dataclass
class SearchOutcome:
    seeds: int = 0
    sim_seconds: float = 0.0
    wall_s: float = 0.0
    found: Found | None = None
    shrunk: list[PlannedFault] = field(default_factory=list)
    shrink_steps: int = 0
    time_to_detect_s: float | None = None


def _plan(spec: RunSpec) -> list[PlannedFault]:
    from harness.registry import build_test

    return build_test(spec).nemesis.plan(node_names(spec.nodes))


def _workload(spec: RunSpec) -> Any:
    from workloads.registry import get_workload

    return get_workload(spec.workload)


def simulate_and_screen(spec_json: dict[str, Any], faults_json: list[dict[str, Any]] | None
                        ) -> tuple[int, dict[str, int], float, float, list[dict[str, Any]]]:
    """In a worker process: one seed (with its own schedule, or `faults_json`) into a scratch dir."""
    spec = build_spec(spec_json)
    faults = _plan(spec) if faults_json is None else [PlannedFault.from_json(f) for f in faults_json]
    d = Path(tempfile.mkdtemp(prefix="chaos-sim-search-"))
    t0 = time.monotonic()
    try:
        out = simulate(spec, _workload(spec), faults, d, lambda _: None)
        found = screen(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return spec.seed, found, out.sim_seconds, time.monotonic() - t0, [f.to_json() for f in faults]


def _still_fails(spec: RunSpec, faults: list[PlannedFault]) -> bool:
    _, found, _, _, _ = simulate_and_screen(spec.to_json(), [f.to_json() for f in faults])
    return bool(found)


def shrink(spec: RunSpec, faults: list[PlannedFault], deadline: float,
           say: Callable[[str], None]) -> tuple[list[PlannedFault], int]:
    """The smallest schedule found that still fails: fewer faults, then shorter, then later."""
    best, steps = list(faults), 0
    i = 0
    while i < len(best) and time.monotonic() < deadline:  # fewer
        removed, cand = best[i], best[:i] + best[i + 1:]
        steps += 1
        if _still_fails(spec, cand):
            best = cand
            say(f"shrink: fault {removed.id} ({removed.family}-{removed.kind}) is not needed; {len(best)} left")
        else:
            i += 1
    for i in range(len(best)):  # shorter
        while best[i].duration_s > 0.5 and time.monotonic() < deadline:
            cand = best[:i] + [replace(best[i], duration_s=round(best[i].duration_s / 2, 3))] + best[i + 1:]
            steps += 1
            if not _still_fails(spec, cand):
                break
            best = cand
    for i in range(len(best)):  # later
        while time.monotonic() < deadline:
            later = round(best[i].at_s + max(1.0, best[i].duration_s), 3)
            if later + best[i].duration_s > spec.time_limit:
                break
            cand = best[:i] + [replace(best[i], at_s=later)] + best[i + 1:]
            steps += 1
            if not _still_fails(spec, cand):
                break
            best = cand
    return best, steps


def search(base: RunSpec, *, first_seed: int, budget_s: float, jobs: int, say: Callable[[str], None],
           max_seeds: int | None = None, shrink_found: bool = True) -> SearchOutcome:
    """Simulate seeds until one fails (or the budget or `max_seeds` ends); shrink it."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    out = SearchOutcome()
    ctx = multiprocessing.get_context("fork")
    seed = first_seed
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        while time.monotonic() < deadline and out.found is None:
            n = jobs if max_seeds is None else min(jobs, max_seeds - out.seeds)
            if n <= 0:
                break
            batch = [pool.submit(simulate_and_screen, replace(base, seed=s).to_json(), None)
                     for s in range(seed, seed + n)]
            seed += n
            for fut in batch:  # in seed order: the first failing seed is the smallest
                s, found, sim_s, wall, faults = fut.result()
                out.seeds += 1
                out.sim_seconds += sim_s
                if found and out.found is None:
                    out.found = Found(s, found, [PlannedFault.from_json(f) for f in faults], wall)
                    out.time_to_detect_s = time.monotonic() - t0
            say(f"{out.seeds} seeds, {out.sim_seconds:.0f} simulated s in {time.monotonic() - t0:.1f} s"
                + (f"; seed {out.found.seed} fails: {out.found.anomalies}" if out.found else ""))
    if out.found is not None and shrink_found:
        spec = replace(base, seed=out.found.seed)
        out.shrunk, out.shrink_steps = shrink(spec, out.found.faults, deadline + budget_s, say)
    out.wall_s = time.monotonic() - t0
    return out
