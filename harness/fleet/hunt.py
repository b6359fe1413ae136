"""One entry for `chaos sim-search` and `chaos nightly`: the search on this host (`--jobs`) or on a
Spark cluster (`--spark-master`), with the live progress line and an optional per-seed verdict file.

The verdict file (JSON lines, one per seed, in seed order) is what makes the two paths comparable:
`{"seed": 17, "screened": {"lost-write": 2}, "probes": {"controller-failover": 3}}`. The screen's
verdict and the coverage probes the seed hit (every node's counts, summed) are a pure function of the
seed (the simulator is deterministic per seed, kernel/rng.py), so both paths must write the same
lines; the probes make a campaign's coverage (hit / never hit per probe) readable from the file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.coverage_guide import CoverageGuide
from harness.fleet.progress import SearchProgress, live_search
from harness.sim_search import SearchOutcome, Simulated, search
from kernel.spec import RunSpec


def write_verdicts(path: Path, verdicts: dict[int, dict[str, Any]]) -> None:
    """`verdicts`: seed -> {"screened": ..., "probes": ...}, written in seed order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"seed": s, **verdicts[s]}, sort_keys=True) + "\n"
                            for s in sorted(verdicts)))


def hunt(base: RunSpec, *, first_seed: int, budget_s: float, jobs: int, spark_master: str | None,
         fleet: bool, say: Callable[[str], None], store: Path, max_seeds: int | None = None,
         check_batch: int = 32, rates: tuple[float, ...] = (), keep_going: bool = False,
         verdicts_path: Path | None = None, progress: bool = False, shrink_found: bool = True,
         guide: CoverageGuide | None = None) -> SearchOutcome:
    """`fleet`: seeds as Spark tasks on `spark_master` (failing runs kept under
    STORE/sim-fleet/<stamp>/); else `jobs` processes here, checks on `spark_master`, steered by
    `guide` when given (the fleet draws plain seed ranges only)."""
    verdicts: dict[int, dict[str, Any]] = {}
    try:
        out = _hunt(base, verdicts, first_seed=first_seed, budget_s=budget_s, jobs=jobs, spark_master=spark_master,
                    fleet=fleet, say=say, store=store, max_seeds=max_seeds, check_batch=check_batch, rates=rates,
                    keep_going=keep_going, progress=progress, shrink_found=shrink_found, guide=guide)
    finally:  # a harness error or Ctrl-C part-way keeps the verdicts of the seeds already done
        if verdicts_path is not None:
            write_verdicts(verdicts_path, verdicts)
            say(f"per-seed verdicts: {verdicts_path} ({len(verdicts)} seeds, "
                f"{sum(bool(v['screened']) for v in verdicts.values())} failing)")
    if out.found is not None and not shrink_found:
        out.shrunk = list(out.found.faults)  # saved as found
    return out


def _hunt(base: RunSpec, verdicts: dict[int, dict[str, Any]], *, first_seed: int, budget_s: float, jobs: int,
          spark_master: str | None, fleet: bool, say: Callable[[str], None], store: Path, max_seeds: int | None,
          check_batch: int, rates: tuple[float, ...], keep_going: bool, progress: bool, shrink_found: bool,
          guide: CoverageGuide | None) -> SearchOutcome:
    """The search on one of its two paths, each seed's verdict put in `verdicts` as it comes."""
    if fleet:
        from harness.fleet.search import fleet_search

        def row_seen(row: dict[str, Any]) -> None:
            if "checked" not in row:
                verdicts[int(row["seed"])] = {"screened": dict(row["screened"]),
                                              "probes": dict(row.get("probes", {}))}

        work = store / "sim-fleet" / time.strftime("%Y%m%dT%H%M%S")
        fo = fleet_search(
            base, first_seed=first_seed, budget_s=budget_s, spark_master=spark_master, say=say, work_dir=work,
            max_seeds=max_seeds, shrink_found=shrink_found, check_batch=check_batch, rates=rates,
            keep_going=keep_going, on_seed=row_seen, progress=progress)
        say(f"Spark: {fo.cores} cores on {len(fo.hosts)} host(s); {fo.duplicates} retried task result(s) "
            f"dropped (each seed counted once); failing seeds' runs under {work}")
        return fo
    shown = SearchProgress(budget_s, max_seeds)

    def sim_seen(sim: Simulated) -> None:
        verdicts[sim.seed] = {"screened": dict(sim.screened), "probes": dict(sim.probes)}
        shown.seeds = len(verdicts)
        shown.failures += bool(sim.screened)

    with live_search(shown, enabled=progress):
        return search(base, first_seed=first_seed, budget_s=budget_s, jobs=jobs, say=say, max_seeds=max_seeds,
                      check_batch=check_batch, spark_master=spark_master, rates=rates, keep_going=keep_going,
                      on_seed=sim_seen, shrink_found=shrink_found, guide=guide)


def save_found(base: RunSpec, out: SearchOutcome, rates: tuple[float, ...], spark_master: str | None,
               say: Callable[[str], None], check: bool) -> Path:
    """The found seed's smallest failing schedule simulated once more into the store as a normal run
    (`test.json` keeps the schedule, so `chaos replay` reproduces it), checked unless `check` is off."""
    from harness.registry import build_test
    from harness.run import run
    from harness.sim_search import seed_spec

    assert out.found is not None
    spec = seed_spec(base, out.found.seed, rates)
    search_meta = {"seeds": out.seeds, "time_to_detect_s": round(out.time_to_detect_s or 0, 3),
                   "found_by": out.found.judge, "found": out.found.anomalies,
                   "original_schedule": [f.to_json() for f in out.found.faults]}
    result = run(build_test(spec, spark_master=spark_master), progress=False, say=say, faults=out.shrunk,
                 check=check, extra_meta={"schedule_shrunk": True, "search": search_meta})
    return result.run_dir
