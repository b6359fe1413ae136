"""`chaos check PATH...`: check run directories, directories holding history.jsonl, or history files.

Several paths (or a shell glob such as `STORE/*/*`) are checked as one Spark job keyed by run, so
the session start and the job's fixed costs are paid once; each run still gets its own results.json,
and the exit code is the worst of them.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--spark-master", default=None, help="Spark master URL (default local[*]).")
@click.option("--elle-cli", default=None,
              help="elle-cli launcher or jar (default: $ELLE_CLI, else elle-cli on PATH; '' turns it off).")
@click.option("--no-perf", is_flag=True, help="Skip the performance facts.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write results.json and perf/ here (one PATH only; default: beside the run's own "
                   "history.jsonl only).")
@click.option("--server/--no-server", default=True, show_default=True,
              help="Check on the shared warm Spark server (started on first use, stopped after "
                   "$CHAOS_CHECK_SERVER_IDLE s idle, default 600); --no-server starts Spark in this process.")
def check(paths: tuple[Path, ...], spark_master: str | None, elle_cli: str | None, no_perf: bool,
          out: Path | None, server: bool) -> int:
    """Check histories for lost writes, divergent logs and Jepsen's other Kafka anomalies.

    Exit codes: 0 valid, 1 anomalies found, 2 unknown (incomplete history), 3+ error; with several
    PATHs, the worst of them.
    """
    from results.check import check_run, check_runs, print_summary, print_verdict
    from results.elle import absent_note, elle_command
    from results.spark import check_master, use_server

    elle_command(elle_cli)  # a mistaken flag is the only thing said, before the note below
    check_master(spark_master)
    use_server(server and spark_master is None)
    if (note := absent_note(elle_cli)) is not None:
        click.echo(note, err=True)
    if len(paths) == 1:
        result = check_run(paths[0], spark_master=spark_master, elle_cli=elle_cli, perf=not no_perf, out=out)
        print_verdict(result)
        return result.exit_code
    results = check_runs(list(paths), spark_master=spark_master, elle_cli=elle_cli, perf=not no_perf, out=out)
    return print_summary(list(paths), results)
