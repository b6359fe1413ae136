"""`chaos sim-search`: hunt for a failing seed on the simulator, shrink it, save it as a run."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from harness.options import Finite, parse_budget, parse_rates
from kernel.errors import UsageError


@click.command("sim-search")
@click.option("--bug", "bugs", multiple=True, help="Turn on a broker bug switch (repeatable).")
@click.option("--budget", default="10m", show_default=True,
              help="Wall time for the search (60s, 10m, 1h); shrinking a failing seed may take as long again.")
@click.option("--nemesis", default=None, help="Fault families, comma-separated (default: every one the simulator has).")
@click.option("--nodes", type=click.IntRange(3, 9), default=3, show_default=True)
@click.option("--time-limit", type=Finite(5, 3600), default=60.0, show_default=True,
              help="Simulated seconds of workload per seed.")
@click.option("--rate", "rate_text", default="20,100", show_default=True,
              help="Target ops/s over all workers (simulated time), or a comma-separated list that the seeds "
                   "take turns at (seed modulo its length), e.g. 20,100.")
@click.option("--nemesis-interval", type=Finite(0.5, 3600), default=10.0, show_default=True)
@click.option("--first-seed", type=click.IntRange(0, 2**62), default=1, show_default=True)
@click.option("--max-seeds", type=click.IntRange(1, 10**9), default=None, help="Stop after this many seeds.")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="Parallel simulator processes on this host [default: one per core]; not with --spark-master.")
@click.option("--check-batch", type=click.IntRange(0, 10_000), default=32, show_default=True,
              help="Judge every this many seeds with the real checker as one Spark job, sooner when their "
                   "histories reach 128 MB (0: the quick screen only).")
@click.option("--spark-master", default=None,
              help="Run the seeds as Spark tasks on this master (local[2], spark://HOST:7077), and the checks there; "
                   "the workers must run this venv and reach --store at the same path (harness/fleet/).")
@click.option("--keep-going", is_flag=True, help="Run every seed of the range even after one failed.")
@click.option("--verdicts", "verdicts_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write each seed's screen verdict here (JSON lines, in seed order).")
@click.option("--no-shrink", is_flag=True, help="Save a failing seed's run with its whole schedule, unshrunk.")
@click.option("--no-progress", is_flag=True, help="No live progress line (seeds, seeds/hour, failures, time left).")
@click.option("--store", default="store", show_default=True)
@click.option("--no-check", is_flag=True, help="Save the shrunk run without the Spark check and report.")
@click.option("--guide", type=click.Choice(["none", "coverage"]), default="none", show_default=True,
              help="coverage: half of each round mutates the schedules of seeds that hit coverage probes no "
                   "earlier seed hit (harness/coverage_guide.py).")
@click.option("--workload", default="queue", show_default=True, help="Workload (queue, hotkey, txn).")
@click.option("--txn", is_flag=True, help="The transactional workload; same as --workload txn.")
def sim_search(bugs: tuple[str, ...], budget: str, nemesis: str | None, nodes: int, time_limit: float, rate_text: str,
               nemesis_interval: float, first_seed: int, max_seeds: int | None, jobs: int | None, check_batch: int,
               spark_master: str | None, keep_going: bool, verdicts_path: Path | None, no_shrink: bool,
               no_progress: bool, store: str, no_check: bool, guide: str, workload: str, txn: bool) -> int:
    """Simulate seeds in parallel until one fails (the quick screen for loss and divergence at once,
    the real checker every --check-batch seeds); shrink its fault schedule; save the smallest
    failing run in the store with its check and report.

    Exit 1 when a failing run was found (its directory and replay command are printed), 0 when the
    budget ran out with every seed clean.
    """
    from harness.fleet.hunt import hunt, save_found
    from harness.registry import build_test
    from kernel.spec import build_spec

    rates = parse_rates(rate_text)
    if jobs is not None and spark_master is not None:
        raise UsageError("--jobs is for one host; with --spark-master the cluster's cores run the seeds")
    if guide == "coverage" and spark_master is not None:
        raise UsageError("--guide coverage steers the search on this host; it cannot be combined with --spark-master")
    values: dict[str, Any] = {"provisioner": "sim", "nodes": nodes, "time_limit": time_limit, "rate": rates[0],
                              "nemesis_interval": nemesis_interval, "bugs": list(bugs), "store": store,
                              "name": "sim-search", "workload": "txn" if txn else workload}
    if nemesis is not None:
        values["nemesis"] = nemesis
    base = build_test(build_spec(values)).spec  # every name checked; the sim's default mix filled in
    say = lambda s: click.echo(f"sim-search: {s}", err=True)  # noqa: E731
    from harness.coverage_guide import CoverageGuide

    steer = CoverageGuide(first_seed, time_limit) if guide == "coverage" else None
    from results.spark import use_server

    # the batches' checks on the shared warm check server, as a run's: not a driver JVM and a cold
    # compile of every query in each search. (Its worker processes are forked before the first check,
    # and a fleet on --spark-master keeps the session it runs its seeds on.)
    use_server(spark_master is None)
    out = hunt(base, first_seed=first_seed, budget_s=parse_budget(budget), jobs=jobs or os.cpu_count() or 1,
               spark_master=spark_master, fleet=spark_master is not None, say=say, store=Path(store),
               max_seeds=max_seeds, check_batch=check_batch, rates=rates, keep_going=keep_going,
               verdicts_path=verdicts_path, progress=not no_progress and sys.stderr.isatty(),
               shrink_found=not no_shrink, guide=steer)
    rate_h = out.seeds / out.wall_s * 3600 if out.wall_s else 0.0
    say(f"coverage: {len(out.first_hit)} probes hit" + (f"; corpus {len(steer.corpus)} schedules, "
                                                       f"{steer.mutants} mutants run" if steer else ""))
    say(f"{out.seeds} seeds ({out.sim_seconds:.0f} simulated s) in {out.wall_s:.1f} s: {rate_h:.0f} seeds/hour; "
        f"{out.spark_checked} of them judged by the checker in {out.spark_batches} Spark job(s)")
    if out.found is None:
        say("no failing seed within the budget")
        return 0
    say(f"seed {out.found.seed} failed after {out.time_to_detect_s:.1f} s: {out.found.anomalies}; "
        f"schedule shrunk from {len(out.found.faults)} to {len(out.shrunk)} faults in {out.shrink_steps} steps")
    run_dir = save_found(base, out, rates, spark_master, say, check=not no_check)
    say(f"saved: {run_dir}")
    say(f"reproduce with: chaos replay {run_dir}")
    return 1
