"""`chaos run` and `chaos replay`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from harness.errors import UsageError
from harness.spec import RunSpec, build_spec, load_toml

D = RunSpec()


def _spec_options(f: Any) -> Any:
    opts = [
        click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML file with these keys."),
        click.option("--name", help=f"Test name (store/<name>/...). [{D.name}]"),
        click.option("--nodes", type=int, help=f"Number of nodes. [{D.nodes}]"),
        click.option("--workload", help=f"Workload. [{D.workload}]"),
        click.option("--nemesis", help=f"Comma-separated fault families or family-kind names; '' for none. [{','.join(D.nemesis)}]"),
        click.option("--nemesis-interval", type=float, help=f"Seconds between faults. [{D.nemesis_interval}]"),
        click.option("--time-limit", type=float, help=f"Seconds of workload. [{D.time_limit}]"),
        click.option("--concurrency", type=int, help=f"Client workers. [{D.concurrency}]"),
        click.option("--rate", type=float, help=f"Target ops/s over all workers. [{D.rate}]"),
        click.option("--seed", type=int, help="Run seed (default: from the clock, and saved)."),
        click.option("--acks", help=f"Producer acks: all, 1 or 0. [{D.acks}]"),
        click.option("--idempotence/--no-idempotence", default=None, help="Idempotent producers. [on]"),
        click.option("--replication-factor", type=int, help=f"[{D.replication_factor}]"),
        click.option("--min-insync", type=int, help=f"min.insync.replicas. [{D.min_insync}]"),
        click.option("--partitions", type=int, help=f"Keys (= partitions of the topic). [{D.partitions}]"),
        click.option("--bug", "bugs", multiple=True, help="Turn on a broker bug switch (repeatable)."),
        click.option("--provisioner", help=f"docker or ssh. [{D.provisioner}]"),
        click.option("--hosts", help="ssh provisioner: hosts file."),
        click.option("--store", help=f"Run store directory. [{D.store}]"),
        click.option("--leave-running", is_flag=True, default=None, help="Keep the cluster up afterwards."),
        click.option("--cluster", help=f"Cluster name (label chaos.cluster). [{D.cluster}]"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _make_spec(config_file: Path | None, flags: dict[str, Any]) -> RunSpec:
    values: dict[str, Any] = load_toml(config_file) if config_file else {}
    for k, v in flags.items():
        if v is None or (k == "bugs" and not v):
            continue
        values[k] = v
    if "seed" not in values:
        import time

        values["seed"] = int(time.time() * 1000) % 1_000_000_007
    if isinstance(values.get("nemesis"), str) and values["nemesis"] == "":
        values["nemesis"] = ()
    return build_spec(values).validate()


@click.command()
@_spec_options
@click.option("--test-count", type=int, default=1, show_default=True, help="Repeat with seeds seed, seed+1, ...")
@click.option("--no-progress", is_flag=True, help="No live progress line.")
def run(config_file: Path | None, test_count: int, no_progress: bool, **flags: Any) -> int:
    """Provision, run a workload under faults, record the history, check it, report.

    Exit codes: 0 valid, 1 anomalies found, 2 unknown, 3+ the harness failed.
    """
    from harness.run import run as do_run

    if test_count < 1:
        raise UsageError(f"--test-count must be at least 1, not {test_count}")
    spec = _make_spec(config_file, flags)
    worst = 0
    for i in range(test_count):
        s = build_spec({"seed": spec.seed + i}, base=spec)
        out = do_run(s, progress=not no_progress)
        click.echo(f"run {i + 1}/{test_count} seed {s.seed}: {'VALID' if out.valid is True else 'INVALID' if out.valid is False else 'UNKNOWN'}"
                   f" — {out.run_dir}", err=True)
        if out.exit_code != 0:
            click.echo(f"reproduce with: chaos replay {out.run_dir}", err=True)
        worst = max(worst, out.exit_code)
    return worst


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--no-progress", is_flag=True)
def replay(run_dir: Path, no_progress: bool) -> int:
    """Re-run a stored run's exact configuration and seed, and compare the anomalies found."""
    from harness.run import run as do_run

    tj = run_dir / "test.json"
    if not tj.is_file():
        raise UsageError(f"{run_dir} has no test.json; name a run directory from the store")
    meta = json.loads(tj.read_text())
    spec = build_spec(meta["config"])
    before = set()
    if (run_dir / "results.json").is_file():
        before = set(json.loads((run_dir / "results.json").read_text()).get("error_types", []))
    out = do_run(spec, progress=not no_progress)
    after = set(out.anomalies)
    same = before == after
    click.echo(f"replay of seed {spec.seed}: original {sorted(before) or 'none'}, now {sorted(after) or 'none'} — "
               f"{'the same anomalies came back' if same else 'DIFFERENT anomalies'}; {out.run_dir}", err=True)
    sys.stdout.flush()
    return out.exit_code
