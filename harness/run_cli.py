"""`chaos run` and `chaos replay`.

The flags of `chaos run` are generated from `kernel.spec.RunSpec`'s fields, so a flag and a TOML
key always mean the same thing and are checked by the same code.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import click

from kernel.errors import HistoryError, UsageError
from kernel.spec import RunSpec, build_spec, default_of, load_toml


def _flag_type(kind: str) -> Any:
    return {"int": int, "float": float}.get(kind, str)


def _spec_options(f: Any) -> Any:
    """One click option per RunSpec field (except `extra`, a TOML table), help and default from its metadata."""
    opts = [click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML file with these keys.")]
    for fld in fields(RunSpec):
        if fld.name == "extra":
            continue
        meta = fld.metadata
        flag = meta.get("flag") or "--" + fld.name.replace("_", "-")
        default = default_of(fld.name)
        shown = ",".join(default) if isinstance(default, tuple) else default
        help_text = f"{meta['help']} [{shown}]" if fld.name != "seed" else meta["help"]
        if fld.type == "bool":
            if "/" in flag:
                opts.append(click.option(flag, fld.name, default=None, help=help_text))
            else:
                opts.append(click.option(flag, fld.name, is_flag=True, default=None, help=help_text))
        elif fld.name == "bugs":
            opts.append(click.option(flag, fld.name, multiple=True, help=help_text))
        else:
            opts.append(click.option(flag, fld.name, type=_flag_type(str(fld.type)), default=None, help=help_text))
    for o in reversed(opts):
        f = o(f)
    return f


def make_spec(config_file: Path | None, flags: dict[str, Any]) -> RunSpec:
    values: dict[str, Any] = load_toml(config_file) if config_file else {}
    for k, v in flags.items():
        if v is None or (k == "bugs" and not v):
            continue
        values[k] = v
    if "seed" not in values:
        values["seed"] = int(time.time() * 1000) % 1_000_000_007
    return build_spec(values)


def _label(valid: Any) -> str:
    return "VALID" if valid is True else "INVALID" if valid is False else "UNKNOWN"


@click.command()
@_spec_options
@click.option("--test-count", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="Repeat with seeds seed, seed+1, ...; stops at the first INVALID run (as Jepsen's does) "
                   "unless --keep-going.")
@click.option("--keep-going", is_flag=True, help="With --test-count: run every seed even after an INVALID one.")
@click.option("--no-progress", is_flag=True, help="No live progress line.")
@click.option("--until-covered", "until_covered", default=None, metavar="PROBES",
              help="Comma-separated probes (cluster-impl/README.md): draw seeds seed, seed+1, ... until every "
                   "one was hit by some run, or --test-count runs are done (the budget); stops early on a failure.")
@click.option("--txn", is_flag=True, help="The transactional workload (Jepsen's :txn); same as --workload txn.")
def run(config_file: Path | None, test_count: int, keep_going: bool, no_progress: bool, until_covered: str | None,
        txn: bool, **flags: Any) -> int:
    """Provision, run a workload under faults, record the history, check it, report.

    Exit codes: 0 valid, 1 anomalies found, 2 unknown, 3 usage, 4 provisioning, 5 a node, 6 this
    machine, 7 a harness bug; 130/143/129 stopped by Ctrl-C/SIGTERM/SIGHUP (healed, torn down).
    """
    from harness.registry import build_test
    from harness.run import run as do_run

    if txn:
        if flags.get("workload") not in (None, "txn"):
            raise UsageError(f"--txn is the txn workload; it cannot be combined with --workload {flags['workload']}")
        flags["workload"] = "txn"
    spec = make_spec(config_file, flags)
    build_test(spec)  # every name checked before the first run starts
    wanted = _wanted_probes(until_covered)
    hit: set[str] = set()
    worst = 0
    for i in range(test_count):
        s = build_spec({"seed": spec.seed + i}, base=spec)
        out = do_run(build_test(s), progress=not no_progress, narrate=True)
        if s.check_determinism:
            from harness.determinism import check_determinism

            check_determinism(s, out.run_dir / "history.jsonl")
            click.echo(f"seed {s.seed}: two simulations wrote the identical history", err=True)
        note = _verdict_note(out.run_dir)
        click.echo(f"run {i + 1}/{test_count} seed {s.seed}: {_label(out.valid)}{f' ({note})' if note else ''}"
                   f" — {out.run_dir}", err=True)
        if out.exit_code != 0:
            click.echo(f"reproduce with: chaos replay {out.run_dir}", err=True)
        worst = max(worst, out.exit_code)
        if wanted is not None:
            hit |= _hit_probes(out.run_dir, wanted)
            missing = sorted(wanted - hit)
            click.echo(f"until-covered: {len(wanted) - len(missing)}/{len(wanted)} hit"
                       + (f", still missing {', '.join(missing)}" if missing else " — every named probe hit"), err=True)
            if not missing or out.exit_code != 0:
                break
        if out.exit_code == 1 and not keep_going and i + 1 < test_count:
            # a user repeating a run hunts for one failure: once found, the rest of the budget is
            # better spent on `chaos replay` of it (Jepsen's `--test-count` stops there too)
            click.echo(f"stopping at the first INVALID run ({test_count - i - 1} left; --keep-going runs them)",
                       err=True)
            break
    if wanted is not None and wanted - hit:
        click.echo(f"until-covered: the budget ({test_count} runs) ended with {', '.join(sorted(wanted - hit))} "
                   "never hit", err=True)
    return worst


def _wanted_probes(arg: str | None) -> set[str] | None:
    """The probes `--until-covered` names (checked against the registry the first run's files carry:
    the harness does not import the broker)."""
    if arg is None:
        return None
    names = {n.strip() for n in arg.split(",") if n.strip()}
    if not names:
        raise UsageError("--until-covered needs probe names, comma-separated (cluster-impl/README.md lists them)")
    return names


def _hit_probes(run_dir: Path, wanted: set[str]) -> set[str]:
    """Which of `wanted` the run hit; a name its broker does not know is a usage error (a typo would never
    be hit, and the search would spend its whole budget on it)."""
    from results.coverage import run_coverage

    cov = run_coverage(run_dir)
    if cov is None:
        return set()
    unknown = sorted(wanted - set(cov.probes)) if cov.probes else []
    if unknown:
        raise UsageError(f"--until-covered: the broker knows no probe {', '.join(unknown)}; the probes are listed "
                         "in cluster-impl/README.md")
    return wanted & set(cov.hit)


def _verdict_note(run_dir: Path) -> str:
    """results.json's "not exercised" note ('' when none, or when the run was not checked)."""
    try:
        return str(json.loads((run_dir / "results.json").read_text()).get("verdict_note", ""))
    except (OSError, ValueError):
        return ""


def _load_run(run_dir: Path) -> dict[str, Any]:
    tj = run_dir / "test.json"
    if not tj.is_file():
        raise UsageError(f"{run_dir} has no test.json; name a run directory from the store")
    try:
        meta = json.loads(tj.read_bytes())
    except (ValueError, RecursionError, OSError) as e:
        raise HistoryError(f"{tj} is not readable JSON ({type(e).__name__}); this run cannot be replayed") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise HistoryError(f"{tj} has no run configuration; this run cannot be replayed")
    return meta


def _hit(run_dir: Path) -> dict[str, str]:
    """fault id -> the node(s) it actually hit, as the run's perf/faults.json recorded them."""
    from results.plots import fault_target

    try:
        windows = json.loads((run_dir / "perf" / "faults.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(w.get("fault")): fault_target(w) for w in windows if isinstance(w, dict)} if isinstance(
        windows, list) else {}


def _schedule_lines(schedule: list[dict[str, Any]], hit: dict[str, str] | None = None) -> list[str]:
    out = []
    for f in schedule:
        targets = ", ".join(f"{k}={t.get('role')}:{t.get('key', t.get('node'))}"
                            for k, t in f.get("targets", {}).items())
        node = (hit or {}).get(str(f.get("id")))
        out.append(f"{f.get('at_s', 0):7.1f}s {f.get('family')}-{f.get('kind')} {targets}".rstrip()
                    + (f" -> {node}" if node else ""))
    return out


def _counts(run_dir: Path) -> dict[str, int]:
    """anomaly type -> count from a run's results.json (empty when it has none)."""
    try:
        res = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(res, dict):
        return {}
    return {t: int(res[t].get("count", 0)) if isinstance(res.get(t), dict) else 0 for t in res.get("error_types", [])}


def _side_by_side(title: tuple[str, str], a: list[str], b: list[str]) -> list[str]:
    width = max([len(x) for x in a] + [len(title[0])])
    out = [f"{title[0]:<{width}} | {title[1]}"]
    for i in range(max(len(a), len(b))):
        left, right = (a[i] if i < len(a) else ""), (b[i] if i < len(b) else "")
        out.append(f"{left:<{width}} | {right}{'' if left == right else '   <- differs'}")
    return out


def _replay_simulated(run_dir: Path, meta: dict[str, Any], spec: RunSpec, *, check: bool = True) -> Any:
    """A simulated run again — with its saved schedule when it was shrunk — and its history compared
    with the original byte for byte. A difference under the same code is a bug in the simulator (exit
    7); under changed code it is expected — replaying a found seed after a fix is how a fix is
    checked — and the replay says so and ends with the new verdict's exit code."""
    from harness.determinism import Nondeterminism, first_difference
    from harness.registry import build_test
    from harness.run import run
    from kernel.nemesis import PlannedFault

    faults = [PlannedFault.from_json(f) for f in meta.get("schedule", [])] if meta.get("schedule_shrunk") else None
    out = run(build_test(spec), progress=False, faults=faults, check=check,
              extra_meta={"replay_of": str(run_dir), "schedule_shrunk": faults is not None})
    if not (run_dir / "history.jsonl").is_file():  # a run shared by its test.json alone (a bug report)
        click.echo(f"replay: {run_dir} holds no history.jsonl, so the replay's is not compared byte for byte "
                   f"({out.run_dir})", err=True)
        return out
    diff = first_difference(run_dir / "history.jsonl", out.run_dir / "history.jsonl")
    if diff is not None:
        line, a, b = diff
        from kernel.store import git_revision

        then, now = meta.get("git", "unknown"), git_revision()
        if then == now and not then.endswith("-dirty") and then != "unknown":
            raise Nondeterminism(f"the replay's history differs from {run_dir}'s at line {line} — the same code "
                                 f"gave another history: a bug in the simulator:\n  original: {a}\n  replay:   {b}")
        # the usual case after a fix: the verdict above is the new code's on the same seed and schedule
        click.echo(f"replay: history.jsonl differs from the original's from line {line} on: the code changed "
                   f"since (recorded at {then}, now {now}), and a different broker or simulator gives a "
                   f"different history; the verdict above is this code's ({out.run_dir})", err=True)
        return out
    click.echo(f"replay: history.jsonl is identical to the original's, byte for byte ({out.run_dir})", err=True)
    return out


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--no-progress", is_flag=True)
def replay(run_dir: Path, no_progress: bool) -> int:
    """Re-run a stored run's exact configuration and seed; compare anomalies and fault schedules."""
    from harness.registry import build_test
    from harness.run import run as do_run

    meta = _load_run(run_dir)
    spec = RunSpec.from_json(meta["config"])
    before = _counts(run_dir)
    if spec.provisioner == "sim":
        out = _replay_simulated(run_dir, meta, spec)
    else:
        out = do_run(build_test(spec), progress=not no_progress)
    after = _counts(out.run_dir) or {t: 0 for t in out.anomalies}
    new_meta = json.loads((out.run_dir / "test.json").read_text())
    a = _schedule_lines(meta.get("schedule", []), _hit(run_dir))
    b = _schedule_lines(new_meta.get("schedule", []), _hit(out.run_dir))
    for line in _side_by_side(("original schedule (-> node hit)", "replay schedule (-> node hit)"), a, b):
        click.echo(line, err=True)
    if not (run_dir / "results.json").is_file():  # shared by its test.json alone: nothing to compare with
        click.echo(f"replay of seed {spec.seed}: {sorted(after) or 'no anomalies'} ({run_dir} holds no results.json "
                   f"to compare with); {out.run_dir}", err=True)
        return out.exit_code
    kinds = sorted(set(before) | set(after))
    for line in _side_by_side(("original anomalies", "replay anomalies"),
                              [f"{t}: {before[t]}" if t in before else f"{t}: -" for t in kinds] or ["none"],
                              [f"{t}: {after[t]}" if t in after else f"{t}: -" for t in kinds] or ["none"]):
        click.echo(line, err=True)
    same = set(before) == set(after)
    click.echo(f"replay of seed {spec.seed}: original {sorted(before) or 'none'}, now {sorted(after) or 'none'} — "
               f"{'the same anomalies came back' if same else 'DIFFERENT anomalies'}; {out.run_dir}", err=True)
    return out.exit_code
