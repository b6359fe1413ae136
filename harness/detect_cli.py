"""`chaos detect`: run the detection matrix (see `harness/detect.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from harness.options import Finite
from kernel.errors import UsageError


@click.command()
@click.option("--bug", "bugs", multiple=True, help="A bug switch to try (repeatable; default: every switch).")
@click.option("--seeds", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Runs per switch (the budget); the baseline gets as many runs as the switches used.")
@click.option("--first-seed", type=click.IntRange(0, 2**62), default=1000, show_default=True)
@click.option("--every-seed", is_flag=True, help="Do not stop at the first detection: count catches over all seeds.")
@click.option("--mix", type=click.Choice(["targeted", "full", "both"]), default="both", show_default=True,
              help="Which fault mixes to cycle through.")
@click.option("--no-baseline", is_flag=True, help="Skip the runs without a switch.")
@click.option("--time-limit", type=Finite(5, 3600), default=90.0, show_default=True)
@click.option("--nodes", type=click.IntRange(3, 9), default=3, show_default=True)
@click.option("--store", default="store", show_default=True)
@click.option("--cluster", default="detect", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=Path("bench-results/detect.json"), show_default=True)
@click.option("--system", default="", help="System under test (default: our broker); one without bug switches "
                                           "runs the baseline only.")
def detect(bugs: tuple[str, ...], seeds: int, first_seed: int, every_seed: bool, mix: str, no_baseline: bool,
           time_limit: float, nodes: int, store: str, cluster: str, out: Path, system: str) -> int:
    """For each bug switch, run the fault mixes that should expose it until an anomaly of data loss or
    divergence is found (or the budget ends); then the same number of runs with no switch.

    Exit 0 when every switch was caught and the baseline found nothing, 1 otherwise.
    """
    from harness.detect import detect as run_matrix
    from harness.detect import table, write
    from harness.registry import bug_switches as known_bugs
    from harness.registry import build_test
    from harness.run import run
    from kernel.spec import RunSpec

    known = known_bugs(system)
    chosen = list(bugs) or list(known)
    for b in chosen:
        if b not in known:
            raise UsageError(f"unknown bug switch {b!r}; known: {', '.join(known) or 'none (this system has none)'}")
    base: dict[str, Any] = {"nodes": nodes, "time_limit": time_limit, "store": store, "cluster": cluster,
                            "system": system}

    def run_one(spec: RunSpec) -> tuple[int, Any, list[str], list[str], Path | None]:
        o = run(build_test(spec), progress=False)
        return o.exit_code, o.valid, o.anomalies, o.bad, o.run_dir

    rows = run_matrix(chosen, base, seeds=seeds, first_seed=first_seed, mix=mix, every_seed=every_seed,
                      baseline=not no_baseline, run_one=run_one, say=lambda s: click.echo(s, err=True))
    write(rows, out, {"nodes": nodes, "time_limit_s": time_limit, "mix": mix, "every_seed": every_seed,
                      "first_seed": first_seed})
    click.echo(table(rows))
    click.echo(f"written to {out} and {out.with_suffix('.md')}", err=True)
    bug_rows = [r for r in rows if r.bug is not None]
    missed = [r.bug for r in bug_rows if not any(a.caught for a in r.attempts)]
    false_alarms = [a for r in rows if r.bug is None for a in r.attempts if a.bad]
    return 1 if missed or false_alarms else 0
