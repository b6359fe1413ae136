"""`chaos sim-search`: simulate seeds in parallel processes until one fails, shrink its fault
schedule, and save the smallest failing run as a normal run directory with its check and report.

- Seeds `first, first+1, ...` are simulated by a pool of worker processes (one per core by
  default), each into a scratch run directory, and screened there at once (`sim_screen.py`: plain
  Python, for loss and divergence), so an obvious failure stops the search within seconds.
- Every `check_batch` seeds (sooner when their histories and replica dumps reach `BATCH_BYTES`),
  the batch's run directories are judged by the real checker as one
  Spark job keyed by run (`harness.registry.judge_many`, on the parent's one warm session): every
  anomaly the checks know, not only the screen's subset, so a seed the screen passes but the
  checks call invalid is found too. The batch is also checked when the screen finds a seed, so a
  smaller failing seed the screen passed wins. (The screen's own finding is not overruled: it is
  confirmed, or not, by the real check of the saved run.) `check_batch=0`: screen only.
- The first failing seed is shrunk: with its seed fixed (so the workload and the simulator's
  choices stay what they were), its schedule is made smaller while it still fails by the judge
  that found it (the screen, or the Spark check) — drop one fault at a time, then halve each
  fault's duration, then start each fault later — one candidate at a time, each a fresh simulation.
- The smallest failing schedule is simulated once more into the store as a normal run
  (`test.json` keeps the schedule and `"schedule_shrunk": true`, so `chaos replay` reproduces it
  byte for byte), and checked by the real checker; its report says the rest.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.coverage_guide import Candidate, CoverageGuide
from harness.provision.sim_screen import screen
from harness.registry import build_test, judge_many
from harness.run import run
from kernel.nemesis import PlannedFault
from kernel.spec import RunSpec, build_spec
from results.coverage import read_coverage


@dataclass
class Found:
    seed: int
    anomalies: dict[str, int]
    faults: list[PlannedFault]
    wall_s: float
    judge: str = "screen"  # what found it: the quick screen, or the batch's Spark check


@dataclass
class SearchOutcome:
    seeds: int = 0
    sim_seconds: float = 0.0
    wall_s: float = 0.0
    found: Found | None = None
    shrunk: list[PlannedFault] = field(default_factory=list)
    shrink_steps: int = 0
    time_to_detect_s: float | None = None
    spark_batches: int = 0  # Spark jobs that judged batches of seeds
    spark_checked: int = 0  # seeds those jobs judged
    first_hit: dict[str, int] = field(default_factory=dict)  # probe -> seeds simulated when it was first hit
    hits: dict[str, int] = field(default_factory=dict)  # probe -> how many seeds' runs hit it


@dataclass
class Simulated:
    """One seed's simulation, as a worker process returns it."""

    seed: int
    screened: dict[str, int]
    sim_seconds: float
    wall_s: float
    faults: list[dict[str, Any]]
    run_dir: str | None  # kept for the batch's Spark check; None when the scratch was removed
    probes: dict[str, int] = field(default_factory=dict)  # coverage probes the run hit (all nodes)


def simulate(spec: RunSpec, store: str | Path, faults: list[PlannedFault] | None = None) -> tuple[Path, dict[str, Any]]:
    """One seed through the one pipeline (`harness.run.run`, unchecked) into `store`: its run
    directory and test.json. `faults`: a schedule to play instead of the seed's."""
    out = run(build_test(replace(spec, store=str(store))), progress=False, say=lambda _: None, check=False,
              faults=faults)
    return out.run_dir, json.loads((out.run_dir / "test.json").read_text())


def simulate_and_screen(spec_json: dict[str, Any], faults_json: list[dict[str, Any]] | None,
                        keep_in: str | None = None) -> Simulated:
    """In a worker process: one seed (with its own schedule, or `faults_json`) run by the one pipeline
    (`harness.run.run`, unchecked) into a scratch store, screened; the run directory is kept under
    `keep_in` (its test.json lets the checker judge it) for the caller's batch check, else removed."""
    spec = build_spec(spec_json)
    faults = None if faults_json is None else [PlannedFault.from_json(f) for f in faults_json]
    store = tempfile.mkdtemp(prefix=f"seed-{spec.seed}-", dir=keep_in)
    t0 = time.monotonic()
    try:
        run_dir, meta = simulate(spec, store, faults)
        found = screen(run_dir, idempotent=spec.idempotence)
        cov = read_coverage(run_dir / "replicas")
        if not (meta["recovered"] and meta["drained"]):  # liveness: after the heal every partition must get
            found["not-recovered"] = 1  # a leader and a full ISR and the drain must finish, in simulated time
    except BaseException:
        shutil.rmtree(store, ignore_errors=True)
        raise
    if keep_in is None:
        shutil.rmtree(store, ignore_errors=True)
    return Simulated(spec.seed, found, float(meta.get("sim_seconds", 0.0)), time.monotonic() - t0,
                     list(meta["schedule"]), str(run_dir) if keep_in is not None else None,
                     {} if cov is None else cov.hit)


#: a batch is judged once its histories and replica dumps reach this size, whatever --check-batch
#: says: 32 runs of 60 s at --rate 100 are more than one 1.4 GB driver checks safely at once (its
#: sorts spill over and over, and at 2 partitions it ran out of heap: docs/measurements/check.md,
#: "2026-11-25: after the batch-memory fixes")
BATCH_BYTES = 128 << 20


def _run_bytes(run_dir: Path) -> int:
    files = [run_dir / "history.jsonl", *run_dir.glob("replicas/*/*.jsonl")]
    return sum(f.stat().st_size for f in files if f.is_file())


def spark_judge(run_dirs: list[str], spark_master: str | None = None,
                say: Callable[[str], None] = lambda _: None) -> list[dict[str, int] | None]:
    """The real checker over many scratch runs as one Spark job: per run, its bad anomalies and
    their counts ({} when valid; `{"elle-cli": 1}` when only elle-cli found it invalid), or None
    when the checker could not judge it (unknown, or an error), which is said and not counted."""
    out: list[dict[str, int] | None] = []
    for d, r in zip(run_dirs, judge_many([Path(d) for d in run_dirs], spark_master), strict=True):
        judged = not isinstance(r, Exception)
        if judged and r.valid is False:
            bad = {t: int(r.anomalies.get(t, {}).get("count", 1)) for t in r.bad_error_types}
            out.append(bad or {"elle-cli": 1})
        elif judged and r.valid is True:
            out.append({})
        else:
            why = str(r) if not judged else "; ".join(r.warnings) or "verdict unknown"
            say(f"the checker could not judge {Path(d).name}: {why}")
            out.append(None)
    return out


Judge = Callable[[RunSpec, list[PlannedFault]], bool]


def _screen_fails(spec: RunSpec, faults: list[PlannedFault]) -> bool:
    return bool(simulate_and_screen(spec.to_json(), [f.to_json() for f in faults]).screened)


def _spark_fails(spark_master: str | None) -> Judge:
    def fails(spec: RunSpec, faults: list[PlannedFault]) -> bool:
        scratch = tempfile.mkdtemp(prefix="chaos-sim-shrink-")
        try:
            sim = simulate_and_screen(spec.to_json(), [f.to_json() for f in faults], keep_in=scratch)
            return bool(sim.screened) or bool(spark_judge([sim.run_dir or ""], spark_master)[0] or {})
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return fails


def shrink(spec: RunSpec, faults: list[PlannedFault], deadline: float,
           say: Callable[[str], None], fails: Judge = _screen_fails) -> tuple[list[PlannedFault], int]:
    """The smallest schedule found that still fails: fewer faults, then shorter, then later."""
    best, steps = list(faults), 0
    i = 0
    while i < len(best) and time.monotonic() < deadline:  # fewer
        removed, cand = best[i], best[:i] + best[i + 1:]
        steps += 1
        if fails(spec, cand):
            best = cand
            say(f"shrink: fault {removed.id} ({removed.family}-{removed.kind}) is not needed; {len(best)} left")
        else:
            i += 1
    for i in range(len(best)):  # shorter
        while best[i].duration_s > 0.5 and time.monotonic() < deadline:
            cand = best[:i] + [replace(best[i], duration_s=round(best[i].duration_s / 2, 3))] + best[i + 1:]
            steps += 1
            if not fails(spec, cand):
                break
            best = cand
    for i in range(len(best)):  # later
        while time.monotonic() < deadline:
            later = round(best[i].at_s + max(1.0, best[i].duration_s), 3)
            if later + best[i].duration_s > spec.time_limit:
                break
            cand = best[:i] + [replace(best[i], at_s=later)] + best[i + 1:]
            steps += 1
            if not fails(spec, cand):
                break
            best = cand
    return best, steps


def seed_spec(base: RunSpec, seed: int, rates: tuple[float, ...] = ()) -> RunSpec:
    """One seed's spec: `base` with that seed and, when `rates` are given, the rate that seed runs at
    (`rates[seed % len(rates)]`, so a seed always runs at the same rate). Mixing rates widens the
    search: a light load leaves long quiet stretches for sessions and timeouts to act in, a busy one
    has records in flight at every failover (a client bug that seeds at 20 ops/s never showed was
    found at 100)."""
    return replace(base, seed=seed, rate=rates[seed % len(rates)]) if rates else replace(base, seed=seed)


def search(base: RunSpec, *, first_seed: int, budget_s: float, jobs: int, say: Callable[[str], None],
           max_seeds: int | None = None, shrink_found: bool = True, check_batch: int = 32,
           spark_master: str | None = None, rates: tuple[float, ...] = (), keep_going: bool = False,
           on_seed: Callable[[Simulated], None] | None = None,
           guide: CoverageGuide | None = None) -> SearchOutcome:
    """Simulate seeds until one fails (or the budget or `max_seeds` ends); shrink it. Each seed runs
    at `base.rate`, or with `rates` at its own (`seed_spec`). `keep_going`: every seed of the range
    runs even after one failed (the first is still the one shrunk); `on_seed` sees each screened seed.
    With `guide`, part of each round (the share the mutants earn) are mutants of the seeds that hit
    probes no earlier one hit (`coverage_guide.py`)."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    out = SearchOutcome()
    ctx = multiprocessing.get_context("fork")
    scratch = tempfile.mkdtemp(prefix="chaos-sim-search-") if check_batch > 0 else None
    pending: list[Simulated] = []  # screened clean, waiting for the batch's Spark check
    pending_bytes = 0

    def found_by_spark() -> bool:
        return out.found is not None and out.found.judge == "spark"

    def judge_pending() -> None:
        nonlocal pending_bytes
        if not pending:
            return
        t = time.monotonic()
        verdicts = spark_judge([p.run_dir or "" for p in pending], spark_master, say)
        out.spark_batches += 1
        out.spark_checked += sum(v is not None for v in verdicts)
        for sim, bad in zip(pending, verdicts, strict=True):
            if bad and (out.found is None or sim.seed < out.found.seed):
                out.found = Found(sim.seed, bad, [PlannedFault.from_json(f) for f in sim.faults], sim.wall_s,
                                  judge="spark")
                out.time_to_detect_s = time.monotonic() - t0
            shutil.rmtree(sim.run_dir or "", ignore_errors=True)
        say(f"checked {len(pending)} seeds as one Spark job in {time.monotonic() - t:.1f} s"
            + (f"; seed {out.found.seed} fails: {out.found.anomalies}" if out.found and found_by_spark() else ""))
        pending.clear()
        pending_bytes = 0

    try:
        with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            seed = first_seed
            while time.monotonic() < deadline and (keep_going or out.found is None):
                n = jobs if max_seeds is None else min(jobs, max_seeds - out.seeds)
                if n <= 0:
                    break
                todo = guide.candidates(n) if guide is not None else [Candidate(s, None) for s in range(seed, seed + n)]
                batch = [pool.submit(simulate_and_screen, seed_spec(base, c.seed, rates).to_json(), c.faults, scratch)
                         for c in todo]
                seed += n
                for cand, fut in zip(todo, batch, strict=True):  # in seed order: the first failing seed is the smallest
                    sim = fut.result()
                    out.seeds += 1
                    out.sim_seconds += sim.sim_seconds
                    for p in sim.probes:
                        out.first_hit.setdefault(p, out.seeds)
                        out.hits[p] = out.hits.get(p, 0) + 1
                    if guide is not None:
                        guide.observe(sim.seed, sim.faults, sim.probes, mutant=cand.faults is not None)
                    if on_seed is not None:
                        on_seed(sim)
                    if sim.screened and out.found is None:
                        out.found = Found(sim.seed, sim.screened, [PlannedFault.from_json(f) for f in sim.faults],
                                          sim.wall_s)
                        out.time_to_detect_s = time.monotonic() - t0
                    if sim.run_dir is not None:
                        pending.append(sim)
                        pending_bytes += _run_bytes(Path(sim.run_dir))
                say(f"{out.seeds} seeds, {out.sim_seconds:.0f} simulated s in {time.monotonic() - t0:.1f} s"
                    + (f"; seed {out.found.seed} fails: {out.found.anomalies}" if out.found else ""))
                if len(pending) >= check_batch > 0 or pending_bytes >= BATCH_BYTES or out.found is not None:
                    judge_pending()
        judge_pending()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if out.found is not None and shrink_found:
        spec = seed_spec(base, out.found.seed, rates)
        fails = _spark_fails(spark_master) if found_by_spark() else _screen_fails
        out.shrunk, out.shrink_steps = shrink(spec, out.found.faults, deadline + budget_s, say, fails)
    out.wall_s = time.monotonic() - t0
    return out
