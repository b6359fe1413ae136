"""`chaos nightly --config nightly.toml`: the matrix of runs, a summary page and JUnit XML (see nightly.py)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.options import Finite


@click.command()
@click.option("--config", "config_file", type=click.Path(path_type=Path), required=True,
              help="The nightly's TOML file (matrix, budget, shared settings).")
@click.option("--store", default=None, help="Run store (overrides [base] store).")
@click.option("--cluster", default=None, help="Cluster name for every run (overrides [base] cluster).")
@click.option("--budget-minutes", type=Finite(min=0.1, max=7 * 24 * 60), default=None,
              help="Wall-time budget (overrides budget_minutes).")
@click.option("--junit", type=click.Path(path_type=Path), default=None,
              help="Also write the JUnit XML here (it is always in the night's directory).")
@click.option("--spark-master", default=None, help="Spark master URL for the checks (default local[*]).")
@click.option("--dry-run", is_flag=True, help="List the matrix and the time it would take; run nothing.")
@click.option("--no-progress", is_flag=True, help="No live progress line during each run.")
def nightly(config_file: Path, store: str | None, cluster: str | None, budget_minutes: float | None,
            junit: Path | None, spark_master: str | None, dry_run: bool, no_progress: bool) -> int:
    """Run a matrix of chaos runs within a time budget; write STORE/<name>-<date>/index.html and junit.xml.

    Exit codes: 0 every run valid (skipped runs are listed, not failed), else the worst run's code:
    1 anomalies, 2 unknown, 3+ a run crashed (the night goes on), 130/143 stopped.
    """
    from harness.nightly import Night, final_check_reserve, load_plan, run_night, write_summary

    plan = load_plan(config_file, store=store, budget_minutes=budget_minutes, cluster=cluster)
    if dry_run:
        total = 0.0
        if plan.sim is not None:
            total += plan.sim.budget_s
            click.echo(f"first a sim-search stage: {', '.join(plan.sim.mixes)}, {plan.sim.budget_s:.0f} s "
                       f"(shrinking a failing seed may take as long again)")
        for i, c in enumerate(plan.cells, 1):
            total += c.spec.time_limit + plan.overhead_s
            click.echo(f"[{i}/{len(plan.cells)}] {c.label} seed {c.seed}: nemesis {','.join(c.spec.nemesis) or '-'}"
                       f" bugs {','.join(c.spec.bugs) or '-'}; about {c.spec.time_limit + plan.overhead_s:.0f} s")
        reserve = final_check_reserve(plan)
        total += reserve
        click.echo(f"then one check of every run, as one job: about {reserve:.0f} s")
        fits = "fits" if total <= plan.budget_s else "does NOT fit; the later runs would be skipped"
        click.echo(f"{len(plan.cells)} runs, about {total / 60:.1f} min; budget {plan.budget_s / 60:.1f} min: {fits}")
        return 0

    def say(line: str) -> None:
        click.echo(f"nightly: {line}", err=True)

    def save(n: Night) -> None:  # after every run: a night stopped between runs keeps its summary
        write_summary(n, junit=junit)

    night = run_night(plan, spark_master=spark_master, progress=not no_progress, say=say, on_entry=save)
    paths = write_summary(night, junit=junit)
    counts: dict[str, int] = {}
    for e in night.entries:
        counts[e.outcome] = counts.get(e.outcome, 0) + 1
    say(", ".join(f"{n} {o}" for o, n in sorted(counts.items())) + f"; summary {paths[-2]}; JUnit {paths[0]}")
    for e in night.entries:
        if e.exit_code and e.run_dir is not None:
            say(f"{e.cell.label} seed {e.cell.seed}: {e.outcome}; reproduce with: chaos replay {e.run_dir}")
    return night.exit_code
