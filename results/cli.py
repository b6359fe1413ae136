"""`chaos check PATH`: check a run directory, a directory holding history.jsonl, or a history file."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--spark-master", default=None, help="Spark master URL (default local[*]).")
@click.option("--elle-cli", default=None, help="elle-cli jar or command (default: $ELLE_CLI).")
@click.option("--no-perf", is_flag=True, help="Skip the performance facts.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write results.json and perf/ here (default: beside the run's own history.jsonl only).")
def check(path: Path, spark_master: str | None, elle_cli: str | None, no_perf: bool, out: Path | None) -> int:
    """Check a history for lost writes, divergent logs and Jepsen's other Kafka anomalies.

    Exit codes: 0 valid, 1 anomalies found, 2 unknown (incomplete history), 3+ error.
    """
    from results.check import check_run, print_verdict

    result = check_run(path, spark_master=spark_master, elle_cli=elle_cli, perf=not no_perf, out=out)
    print_verdict(result)
    return result.exit_code
