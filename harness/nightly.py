"""A nightly: a matrix of runs (workloads × nemesis mixes × configurations × seeds), one after
another, within a wall-time budget, then one summary page and one JUnit XML file.

The matrix comes from a TOML file (`nightly.toml` at the repository root is the sample):

    name = "nightly"              # the summary goes to STORE/<name>-<YYYYmmdd>/
    budget_minutes = 30           # wall time for all runs; what would not fit is skipped, and said so
    overhead_seconds = 90         # first guess of a run's cost beyond its time limit (then: measured)
    seeds = [1, 2]
    workloads = ["queue", "hotkey"]
    [base]                        # RunSpec settings every run shares (the keys of `chaos run --config`)
    nodes = 3
    [nemeses]                     # mix name = fault families / family-kinds
    kills = ["kill-controller", "kill-leader"]
    [configs.default]             # configuration name = RunSpec settings on top of [base]
    [configs.bug-canary]          # a configuration may narrow the matrix with workloads/nemeses/seeds
    bugs = ["ack-before-replication"]
    workloads = ["hotkey"]

Each run is built exactly as `chaos run` builds it — `kernel.spec.build_spec(values)`, then
`harness.registry.build_test(spec)`, then `harness.run.run(test)` — so a nightly run is replayable
with `chaos replay` like any other; its `test.json` also records which nightly and matrix cell it
belongs to (`"nightly"`), which `chaos analyze` groups by. The runs are stored unchecked and judged
together at the end, as one Spark job keyed by run (`Checker.check_many`, `results.check.check_runs`):
the session start, the JVM's warm-up and every per-job cost are paid once per night, not once per run.

Cells are ordered seed by seed, so when the budget runs short every cell has run once before any
runs twice. A run that crashes is recorded (an `<error>` case) and the night goes on; a stop signal
ends the night after the run in progress has healed and torn down, and the summary is still written.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.night_cells import Cell, Entry
from kernel.errors import EXIT_INTERNAL, EXIT_UNKNOWN, ChaosError, EnvironmentProblem, Interrupted, UsageError
from kernel.names import check_name
from kernel.spec import FIELDS, RunSpec, build_spec, load_toml

TOP_KEYS = {"name", "budget_minutes", "overhead_seconds", "seeds", "workloads", "base", "nemeses", "configs", "sim"}
SELECTORS = {"workloads", "nemeses", "seeds"}


@dataclass(frozen=True)
class Plan:
    name: str
    budget_s: float
    overhead_s: float
    cells: list[Cell]
    store: Path
    sim: Any = None  # a sim-search stage (harness/fleet/nightly_stage.py: SimStage), run first


def _list(v: Any, what: str, kind: type) -> list[Any]:
    if not isinstance(v, list) or not v or not all(isinstance(x, kind) and not isinstance(x, bool) for x in v):
        raise UsageError(f"nightly {what} must be a non-empty list of {kind.__name__}s, not {v!r}")
    return v


def _table(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise UsageError(f"nightly [{what}] must be a table, not {type(v).__name__}")
    return {k.replace("-", "_") if what == "base" else k: x for k, x in v.items()}


def plan_from(data: dict[str, Any], *, store: str | None = None, budget_minutes: float | None = None,
              cluster: str | None = None) -> Plan:
    """The matrix of a nightly file's contents; every run's settings checked before anything starts."""
    from harness.registry import preflight

    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise UsageError(f"unknown nightly setting(s): {', '.join(unknown)}; known: {', '.join(sorted(TOP_KEYS))}")
    name = check_name(data.get("name", "nightly"), "nightly name")
    budget = float(budget_minutes if budget_minutes is not None else data.get("budget_minutes", 30)) * 60
    overhead = float(data.get("overhead_seconds", 90))
    if not 0 < budget <= 7 * 86400 or not 0 <= overhead <= 86400:
        raise UsageError("budget_minutes must be between 0 and a week, overhead_seconds between 0 and a day")
    base = _table(data.get("base", {}), "base")
    if "seed" in base or "name" in base:
        raise UsageError("[base] may not set seed or name: the matrix sets them (seeds = [...], one name per cell)")
    if store is not None:
        base["store"] = store
    if cluster is not None:
        base["cluster"] = cluster
    seeds = _list(data.get("seeds", [1]), "seeds", int)
    workloads = _list(data.get("workloads", ["queue"]), "workloads", str)
    nemeses = {k: _list(v, f"nemeses.{k}", str) if v != [] else [] for k, v in
               _table(data.get("nemeses", {"none": []}), "nemeses").items()}
    configs = _table(data.get("configs", {"default": {}}), "configs") or {"default": {}}
    # a config's seeds narrow the night's (they choose among them); none of them among the night's
    # would leave the config out of the night without a word
    config_seeds = {c: _list(t.get("seeds", seeds), f"configs.{c}.seeds", int) if isinstance(t, dict) else seeds
                    for c, t in configs.items()}
    for cname, own in config_seeds.items():
        if not set(own) & set(seeds):
            raise UsageError(f"[configs.{cname}] seeds {own} are not among the night's seeds {seeds}: a config's "
                             "seeds choose among the night's, so it would have no run")
    cells: list[Cell] = []
    for seed in seeds:
        for cname, ctab in configs.items():
            ctab = {k.replace("-", "_"): v for k, v in _table(ctab, f"configs.{cname}").items()}
            if "seed" in ctab or "name" in ctab:
                raise UsageError(f"[configs.{cname}] may not set seed or name")
            if seed not in config_seeds[cname]:
                continue
            for wl in ctab.get("workloads", workloads):
                for mix in ctab.get("nemeses", list(nemeses)):
                    if mix not in nemeses:
                        raise UsageError(f"[configs.{cname}] names nemesis mix {mix!r}; [nemeses] has "
                                         f"{', '.join(nemeses)}")
                    settings = {k: v for k, v in ctab.items() if k not in SELECTORS}
                    bad = sorted(set(settings) - set(FIELDS))
                    if bad:
                        raise UsageError(f"[configs.{cname}]: unknown run setting(s) {', '.join(bad)}")
                    run_name = f"{wl}-{mix}-{cname}"
                    values = {**base, **settings, "workload": wl, "nemesis": nemeses[mix], "seed": seed,
                              "name": check_name(run_name, f"run name of cell {wl}/{mix}/{cname} (shorten it)")}
                    spec = preflight(build_spec(values))
                    cells.append(Cell(wl, mix, cname, seed, spec))
    if not cells:
        raise UsageError("the nightly matrix is empty: check seeds, workloads, [nemeses] and [configs]")
    sim = None
    if "sim" in data:
        from harness.fleet.nightly_stage import sim_stage_from

        sim = sim_stage_from(data["sim"], str(base.get("store", "store")))
    return Plan(name, budget, overhead, cells, Path(base.get("store", "store")), sim)


def load_plan(path: Path, **overrides: Any) -> Plan:
    return plan_from(load_toml(path), **overrides)


@dataclass
class Night:
    plan: Plan
    out_dir: Path
    started: float
    entries: list[Entry] = field(default_factory=list)
    interrupted: str | None = None
    check_seconds: float = 0.0  # the one check of every run at the end

    @property
    def exit_code(self) -> int:
        return max((e.exit_code for e in self.entries), default=0)


def night_dir(store: Path, name: str) -> Path:
    """`STORE/<name>-<YYYYmmdd>/`, with -2, -3 ... when that night already has one."""
    base = store / f"{name}-{time.strftime('%Y%m%d')}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def _runs_of(spec: RunSpec) -> set[Path]:
    d = Path(spec.store) / spec.name
    return {p for p in d.iterdir() if p.is_dir()} if d.is_dir() else set()


def _fmt(s: float) -> str:
    s = max(0.0, s)
    return f"{int(s // 60)}m{int(s % 60):02d}s"


NOT_JUDGED = "stored; not judged yet"
FINAL_CHECK_RESERVE_S = 60.0


def final_check_reserve(plan: Plan) -> float:
    """Seconds of the budget kept back for the final check (`FINAL_CHECK_RESERVE_S`, at most a quarter)."""
    return min(FINAL_CHECK_RESERVE_S, plan.budget_s / 4)
"""Wall time kept back from the budget (at most a quarter of it) for the one check of every run at
the end: one check of twenty 5,000-op runs fits in it with room, the session's start included
(docs/measurements/check.md, "2026-11-25: before the start-up work")."""


def run_night(plan: Plan, *, spark_master: str | None = None, progress: bool = True,
              say: Callable[[str], None] = print, on_entry: Callable[[Night], None] | None = None) -> Night:
    """Every cell that fits in the budget, one after another, then one check of all of them.

    The runs are stored unchecked (`harness.run.run(check=False)`) and judged at the end as one Spark
    job keyed by run (`Checker.check_many`), so the checker's fixed costs are paid once a night, not
    once a run. A stop signal ends the runs early; the ones that finished are still judged. The
    summary is the caller's (`write_summary`)."""
    from harness.registry import build_test
    from harness.run import run as do_run

    t0 = time.monotonic()
    night = Night(plan, night_dir(plan.store, plan.name), time.time())
    night.out_dir.mkdir(parents=True)
    costs: list[float] = []  # measured seconds beyond the time limit, per finished run
    pending: list[tuple[Entry, Any]] = []  # runs stored and not yet judged, with their checker
    n = len(plan.cells)
    reserve = final_check_reserve(plan)
    if plan.sim is not None:  # first: its budget is its own, and what it leaves goes to the container runs
        from harness.fleet.nightly_stage import entries_of, run_sim_stage

        night.entries.extend(entries_of(run_sim_stage(plan.sim, spark_master=spark_master, say=say), plan.sim))
        if on_entry is not None:
            on_entry(night)
    for i, cell in enumerate(plan.cells):
        spec = cell.spec
        left = plan.budget_s - reserve - (time.monotonic() - t0)
        guess = spec.time_limit + (max(costs) if costs else plan.overhead_s)
        tag = _tag(i, n, cell)
        if night.interrupted:
            night.entries.append(Entry(cell, "not-run", message=f"the nightly was stopped ({night.interrupted})"))
            continue
        if guess > left:
            msg = f"skipped: needs about {_fmt(guess)}, {_fmt(left)} of the budget left"
            say(f"{tag}: {msg}")
            night.entries.append(Entry(cell, "skipped", message=msg))
            continue
        say(f"{tag}: running ({spec.time_limit:g} s of workload, about {_fmt(guess)} in all; {_fmt(left)} left)")
        before = _runs_of(spec)
        started = time.monotonic()
        entry = Entry(cell, "crashed")
        try:
            test = build_test(spec, spark_master=spark_master)
            info = dict(test.info or {})
            info["nightly"] = {"id": night.out_dir.name, "night": time.strftime("%Y-%m-%d"), "cell": cell.label,
                               "workload": cell.workload, "nemeses": cell.mix, "config": cell.config}
            out = do_run(replace(test, info=info), progress=progress, say=say, check=False)
            entry.run_dir = out.run_dir
            entry.outcome, entry.message, entry.exit_code = "unknown", NOT_JUDGED, EXIT_UNKNOWN
            pending.append((entry, test.checker))
        except Interrupted as e:
            entry.outcome, entry.message, entry.exit_code = "incomplete", str(e), e.exit_code
            night.interrupted = str(e).split(":")[0]
        except ChaosError as e:
            entry.message, entry.exit_code = str(e), e.exit_code
        except Exception as e:  # a harness bug in one run must not lose the rest of the night
            entry.message = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            entry.exit_code = EXIT_INTERNAL
        if entry.run_dir is None:
            new = sorted(_runs_of(spec) - before)
            entry.run_dir = new[-1] if new else None
        entry.seconds = time.monotonic() - started
        if entry.outcome not in ("crashed", "incomplete"):
            costs.append(entry.seconds - spec.time_limit)
        night.entries.append(entry)
        if entry.message == NOT_JUDGED:
            say(f"{tag}: ran in {entry.seconds:.0f} s; judged with the others at the end")
        else:
            _say_outcome(say, tag, entry)
        if on_entry is not None:
            on_entry(night)
    try:
        _judge_all(night, pending, spark_master, say)
    except KeyboardInterrupt as e:  # stopped while judging: the runs are stored; say which were not judged
        from harness.signals import signum_of

        stop = Interrupted(f"interrupted by {signal.Signals(signum_of(e)).name} during the check", signum_of(e))
        night.interrupted = night.interrupted or str(stop)
        for entry, _ in pending:
            if entry.message == NOT_JUDGED:
                entry.outcome, entry.message = "incomplete", "stored; not judged: the nightly was stopped"
                entry.exit_code = stop.exit_code
    if on_entry is not None:
        on_entry(night)
    return night


def _judge_all(night: Night, pending: list[tuple[Entry, Any]], master: str | None,
               say: Callable[[str], None]) -> None:
    """One `check_many` per distinct checker (every cell of a nightly has the same one today)."""
    if not pending:
        return
    t0 = time.monotonic()
    say(f"checking {len(pending)} run(s) as one job ...")
    by_checker: dict[Any, list[Entry]] = {}
    for entry, checker in pending:
        by_checker.setdefault(checker, []).append(entry)
    for checker, entries in by_checker.items():
        try:
            verdicts = checker.check_many([e.run_dir for e in entries])
        except EnvironmentProblem as e:  # this machine cannot check (the JVM died): no run can be
            say(f"the check of {len(entries)} run(s) failed: {e}")  # judged one by one either
            verdicts = [e] * len(entries)
        except Exception as e:  # the batch failed as a whole: judge each run on its own, so one bad run
            say(f"the check of {len(entries)} run(s) as one job failed ({type(e).__name__}: {e}); "
                "checking them one by one")  # ... costs only its own verdict
            verdicts = [_check_one(checker, entry.run_dir) for entry in entries]
        app = _spark_app(master)
        for entry, verdict in zip(entries, verdicts, strict=True):
            if isinstance(verdict, ChaosError):
                entry.message, entry.exit_code = str(verdict), verdict.exit_code
                continue
            entry.outcome = {True: "valid", False: "invalid"}.get(verdict.valid, "unknown") \
                if isinstance(verdict.valid, bool) else "unknown"
            entry.anomalies = sorted(getattr(verdict, "anomalies", {}) or {})
            entry.exit_code, entry.message, entry.spark_app = verdict.exit_code, "", app
    night.check_seconds = time.monotonic() - t0
    judged = {id(e) for e, _ in pending}
    for i, cell_entry in enumerate(night.entries):
        if id(cell_entry) in judged:
            _say_outcome(say, _tag(i, len(night.entries), cell_entry.cell), cell_entry)
    say(f"checked {len(pending)} run(s) in {night.check_seconds:.0f} s")


def _check_one(checker: Any, run_dir: Path | None) -> Any:
    try:
        return checker.check(run_dir)
    except ChaosError as e:
        return e
    except Exception as e:
        err = ChaosError(f"the check failed: {type(e).__name__}: {e}")
        err.exit_code = EXIT_INTERNAL
        return err


def _tag(i: int, n: int, cell: Cell) -> str:
    return f"[{i + 1}/{n}] {cell.label} seed {cell.seed}"


def _say_outcome(say: Callable[[str], None], tag: str, entry: Entry) -> None:
    say(f"{tag}: {entry.outcome.upper()} in {entry.seconds:.0f} s"
        + (f" ({', '.join(entry.anomalies)})" if entry.anomalies else "")
        + (f" — {entry.message.splitlines()[0]}" if entry.message else "")
        + (f"; reproduce with: chaos replay {entry.run_dir}" if entry.exit_code and entry.run_dir else ""))


def _spark_app(master: str | None) -> str | None:
    """The SparkSession this process's checks used (the same one all night)."""
    from results.spark import get_spark

    try:  # the conf, not sparkContext: a session of the shared check server (Spark Connect) has none
        app: str = get_spark(master).conf.get("spark.app.id")
        return app
    except Exception:
        return None


def write_summary(night: Night, *, junit: Path | None = None) -> list[Path]:
    """`<night>/index.html`, `<night>/junit.xml` (and `junit` if given), `<night>/nightly.json`; the
    store index refreshed to link the night."""
    import json

    from results.index import write_index
    from results.junit import write_junit

    out = night.out_dir
    out.mkdir(parents=True, exist_ok=True)
    cases = [case_of(e, night.plan.name) for e in night.entries]
    written = [write_junit(out / "junit.xml", night.plan.name, cases)]
    if junit is not None:
        written.append(write_junit(junit, night.plan.name, cases))
    doc = {"name": night.plan.name, "id": out.name, "started": night.started, "finished": time.time(),
           "budget_s": night.plan.budget_s, "exit_code": night.exit_code, "interrupted": night.interrupted,
           "check_seconds": round(night.check_seconds, 1),
           "entries": [e.to_json() for e in night.entries], "coverage": _coverage(night)}
    (out / "nightly.json").write_text(json.dumps(doc, indent=1))
    written.append(out / "nightly.json")
    (out / "index.html").write_text(summary_html(night))
    written.append(out / "index.html")
    written.append(write_index(night.plan.store))
    return written


def _coverage(night: Night) -> dict[str, Any] | None:
    """Probes hit per mix and in the whole night, those never hit, each switch's probe (results.coverage)."""
    from results.coverage import night_coverage

    # a sim mix's probes are its whole search's (every seed, not only the failing one it saved)
    sims = [(f"sim-{e.cell.mix}", e.probes) for e in night.entries if e.kind == "sim" and e.probes is not None]
    registry = None
    if sims:
        from harness.provision.sim import probe_registry

        registry = probe_registry()
    return night_coverage(((e.cell.mix, e.run_dir) for e in night.entries if e.run_dir is not None and e.kind != "sim"),
                          sims, registry)


def case_of(e: Entry, suite: str) -> Any:
    from results.junit import Case

    c = e.cell
    name = f"{c.workload}-{c.mix} seed {c.seed}" if e.kind != "sim" else f"sim-{c.mix} from seed {c.seed}"
    classname = f"{suite}.{c.config}"
    replay = f"chaos replay {e.run_dir}" if e.run_dir else "no run directory was made"
    if e.outcome == "valid":
        return Case(classname, name, e.seconds, "passed", system_out=str(e.run_dir or e.message))
    if e.outcome == "invalid":
        return Case(classname, name, e.seconds, "failure",
                    message=f"anomalies: {', '.join(e.anomalies) or 'see results.json'}; reproduce: {replay}",
                    detail=f"run: {e.run_dir}\nreport: {e.run_dir and e.run_dir / 'report.html'}\n{replay}")
    if e.outcome in ("skipped", "not-run"):
        return Case(classname, name, 0.0, "skipped", message=e.message)
    what = {"unknown": "verdict unknown", "incomplete": "run stopped"}.get(e.outcome, "harness crashed")
    return Case(classname, name, e.seconds, "error",
                message=f"{what}: {e.message.splitlines()[0] if e.message else 'see results.json'}; {replay}",
                detail=e.message or f"run: {e.run_dir}")


def summary_html(night: Night) -> str:
    from results.index import RunSummary
    from results.pages import render

    counts: dict[str, int] = {}
    for e in night.entries:
        counts[e.outcome] = counts.get(e.outcome, 0) + 1
    rows = []
    for e in night.entries:
        href, faults = "", None
        if e.run_dir is not None:
            target = e.run_dir / "report.html" if (e.run_dir / "report.html").is_file() else e.run_dir
            href = os.path.relpath(target, night.out_dir)
            summary = RunSummary.load(e.run_dir)
            faults = summary.faults if summary is not None else None
        rows.append({
            "kind": e.kind, "label": e.cell.label, "verdict": "incomplete" if e.outcome == "not-run" else e.outcome,
            "seed": e.cell.seed, "families": ", ".join(e.cell.spec.nemesis), "faults": faults,
            "bugs": ", ".join(e.cell.spec.bugs), "seconds": f"{e.seconds:.0f} s", "href": href,
            "run": e.run_dir.name if e.run_dir is not None else "",
            "what": ", ".join(e.anomalies) or (e.message.splitlines()[0] if e.message else ""),
        })
    return render("nightly.html", title=night.out_dir.name, rows=rows,
                  summary=", ".join(f"{n} {o}" for o, n in sorted(counts.items())),
                  budget=_fmt(night.plan.budget_s), exit_code=night.exit_code, interrupted=night.interrupted or "",
                  coverage=_coverage(night))
