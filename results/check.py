"""`check_run`: validate a history, run every checker on Spark, search the dependency cycles, fold in
elle-cli, write results.json.

The verdict, like Jepsen's composite checker: any bad anomaly -> invalid (false); otherwise an
incomplete history (a crashed run, `test.json` marked incomplete) or a checker that crashed ->
"unknown"; otherwise valid (true). A history with no send, poll or txn op at all is invalid
(`empty-transaction-graph`), as Jepsen's checker judges it. The cycles (G0, G1c and their real-time
kinds) are our own search (`results.cycles`) over edges the Spark job derives, so they are looked
for with or without elle-cli. elle-cli, when installed, votes the same way on its list-append view;
when it is not, its section says "skipped" and does not degrade the verdict — a missing optional
tool must not turn every nightly run "unknown"; what it would have looked for is said once, when a
command starts (`results.elle.absent_note`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from kernel.checker import describe
from kernel.errors import (
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    ChaosError,
    EnvironmentProblem,
    HistoryError,
    UsageError,
)
from kernel.history import HistoryScan, read_ops
from kernel.history.columns import ColumnFiles, ColumnWriter
from results.background import Task
from results.coverage import bugs_of, read_coverage, verdict_note
from results.hanging import hanging_anomalies
from results.jobs import EXAMPLES, judge_table
from results.replica_columns import write_replica_facts

log = logging.getLogger(__name__)
T = TypeVar("T")
ALWAYS_BAD = [
    "lost-write",
    "unseen",
    "inconsistent-offsets",
    "divergent-replicas",
    "duplicate",
    "unexpected",
    "G1a",
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-nonmonotonic-send",
    "commit-regression",
    "reread-committed",
    "lost-commit",
    "ctp-processed-twice",
    "ctp-skipped-input",
    "ctp-fenced-write-visible",
    "ctp-offsets-beyond-commit",
    "ctp-offsets-behind-commit",
    "precommitted-read",
    "empty-transaction-graph",
    "hanging-transaction",
]
#: cycle anomalies that are bad only where the cycle needs no ww edge (`results.cycles`): G0 and
#: G0-realtime never are
CYCLE_BAD = ("G1c", "G1c-realtime")
EMPTY = "empty-transaction-graph"


@dataclass(frozen=True)
class CheckResult:
    valid: bool | str  # True, False or "unknown"
    anomalies: dict[str, dict[str, Any]]
    bad_error_types: list[str]
    warnings: list[str] = field(default_factory=list)
    elle: dict[str, Any] = field(default_factory=dict)
    perf: dict[str, Any] = field(default_factory=dict)
    run_dir: Path | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase, for the benchmark
    coverage: dict[str, Any] = field(default_factory=dict)  # results.coverage: probes hit, not hit, not exercised
    #: check -> why it had no input (a system without replica dumps or probes): `unknown` for that
    #: part, said in results.json and the report, never counted as a pass
    not_checked: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.valid is True:
            return EXIT_VALID
        if self.valid is False:
            return EXIT_INVALID
        return EXIT_UNKNOWN

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "valid": self.valid,
            "error_types": sorted(self.anomalies),
            "bad_error_types": self.bad_error_types,
        }
        out.update(self.anomalies)
        out["elle"] = self.elle
        out["perf"] = self.perf
        out["warnings"] = self.warnings
        out["timings_s"] = self.timings
        if self.coverage:
            out["coverage"] = self.coverage
            out["verdict_note"] = verdict_note(self.coverage, self.valid)
        if self.not_checked:
            out["not_checked"] = {k: {"valid": "unknown", "why": v} for k, v in self.not_checked.items()}
        return out

    @property
    def label(self) -> str:
        """The verdict as said: VALID, INVALID or UNKNOWN, with "not exercised: ..." when a bug switch
        was on and its scenario's probe never hit (the exit code stays the verdict's)."""
        note = verdict_note(self.coverage, self.valid)
        return f"{describe(self.valid)} ({note})" if note else describe(self.valid)


@dataclass(frozen=True)
class RunFiles:
    """Where a check reads from and writes to.

    `out` is where results.json, perf/ and the elle export go: the run directory itself when the
    history is that directory's own `history.jsonl`, else only a directory the user named with
    `--out` (None: print the verdict, write nothing) — so checking `RUN/other.jsonl` can never
    overwrite RUN's results.
    """

    root: Path
    history: Path
    test_json: dict[str, Any] | None
    replicas: Path | None
    out: Path | None


def locate(path: Path, out: Path | None = None) -> RunFiles:
    """A run dir, a dir holding history.jsonl, or a history file itself."""
    if path.is_dir():
        hist = path / "history.jsonl"
        root = path
    elif path.exists():
        hist, root = path, path.parent
    else:
        raise UsageError(f"{path} does not exist; name a run directory or a history.jsonl file")
    if not hist.is_file():
        raise UsageError(f"{path} has no history.jsonl; name a run directory or a history file")
    own = hist.name == "history.jsonl"
    tj = _test_json(root / "test.json") if own else None
    reps = root / "replicas" if own and (root / "replicas").is_dir() else None
    dest = out if out is not None else (root if own else None)
    if dest is not None:
        _check_writable(dest)
    return RunFiles(root, hist, tj, reps, dest)


def _test_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError, OSError) as e:
        raise HistoryError(f"{path} is not readable JSON ({type(e).__name__}); the run cannot be judged") from None
    if not isinstance(data, dict):
        raise HistoryError(f"{path} holds a {type(data).__name__}, not a run's JSON object; the run cannot be judged")
    cfg = data.get("config", {})
    if not isinstance(cfg, dict):
        raise HistoryError(f"{path}: its config is not a JSON object; the run cannot be judged")
    return data


def _check_writable(dest: Path) -> None:
    """Refuse before any work: results.json must be a file we may replace, the directory writable."""
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"--out {dest} exists and is not a directory")
    for name in ("results.json", "perf"):
        target = dest / name
        if name == "results.json" and target.exists() and not target.is_file():
            raise UsageError(f"{target} exists and is not a file; move it away or check with --out DIR")
        if name == "perf" and target.exists() and not target.is_dir():
            raise UsageError(f"{target} exists and is not a directory; move it away or check with --out DIR")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentProblem(f"cannot create {dest}: {e.strerror or e}") from None
    if not os.access(dest, os.W_OK | os.X_OK):
        raise EnvironmentProblem(f"cannot write into {dest} (read-only?); check with --out DIR to write elsewhere")


def sub_via(test_json: dict[str, Any] | None) -> list[str]:
    """How the run's consumers were given keys (test.json `sub_via`; absent: assign)."""
    cfg = (test_json or {}).get("config", test_json or {})
    got = cfg.get("sub_via") if isinstance(cfg, dict) else None
    if isinstance(got, str):
        got = [x for x in got.split(",") if x]
    return [str(x) for x in got] if isinstance(got, list) and got else ["assign"]


def bad_types(test_json: dict[str, Any] | None, *, drained: bool = True) -> list[str]:
    """Which anomalies invalidate this run. Non-idempotent producers may duplicate on retry, and
    `unseen` means something only when a final drain read everything (Jepsen judges it the same way):
    without one — a crashed run, a history from elsewhere — it is reported but not bad. Consumers that
    subscribe may be rebalanced between polls, which rewinds or skips (Jepsen's allowed-error-types):
    then `poll-skip` and `nonmonotonic-poll` are reported but not bad."""
    bad = list(ALWAYS_BAD)
    if not drained:
        bad.remove("unseen")
    cfg = (test_json or {}).get("config", test_json or {})
    if test_json is not None and cfg.get("idempotence") is False:
        bad.remove("duplicate")
    if "subscribe" in sub_via(test_json):
        bad.remove("poll-skip")
        bad.remove("nonmonotonic-poll")
    return bad


@dataclass
class _Run:
    """One history of a batch, between its validation and its verdict."""

    files: RunFiles
    dest: Path | None
    facts: HistoryScan
    warnings: list[str]
    incomplete: bool
    timings: dict[str, float]
    columns: ColumnFiles  # its facts as typed columns, written by the validating pass
    run: int  # its number in the batch's tables
    replica_facts: Path | None = None  # its replica dumps' committed records as columns (none: no dumps)


def _prepare(path: Path, out: Path | None, write: bool, run: int, workdir: Path) -> _Run:
    """Validate one history and, in the same pass, write its columns for the Spark job."""
    t0 = time.perf_counter()
    files = locate(path, out)
    facts = HistoryScan(files.history)
    try:
        writer = ColumnWriter(workdir, run)
    except OSError as e:
        raise _workdir_problem(workdir, e) from None
    try:
        for op in read_ops(files.history, facts):
            writer.add(op)
        columns = writer.close()
    except BaseException as e:
        writer.abort()
        if isinstance(e, OSError | pa.ArrowException):
            raise _workdir_problem(workdir, e) from None
        raise
    warnings = list(facts.warnings)
    incomplete = facts.incomplete
    if files.test_json is not None and files.test_json.get("complete") is False:
        warnings.append("test.json says the run did not complete")
        incomplete = True
    timings = {"validate": time.perf_counter() - t0}
    t0 = time.perf_counter()
    try:
        replica_facts = write_replica_facts(files.replicas, run, workdir / f"replicas-{run}.parquet")
    except OSError as e:
        raise _workdir_problem(workdir, e) from None
    timings["replica_dumps"] = time.perf_counter() - t0
    return _Run(files, files.out if write else None, facts, warnings, incomplete, timings, columns, run,
                replica_facts)


def _workdir_problem(workdir: Path, e: BaseException) -> EnvironmentProblem:
    return EnvironmentProblem(f"cannot write the check's columns into {workdir} ({e}); free some space there or "
                              "point CHAOS_CHECK_TMPDIR at a roomier directory (it needs about the histories' size)")


def check_run(
    path: Path,
    *,
    spark_master: str | None = None,
    elle_cli: str | None = None,
    write: bool = True,
    perf: bool = True,
    out: Path | None = None,
    on_perf: Callable[[Path], None] | None = None,
) -> CheckResult:
    """Judge one history. Writes results.json/perf/ into the run directory (or `out`) when `write`;
    `on_perf` as `check_runs`.

    The strict reader runs first, in Python, so a malformed line stops the check with a
    HistoryError (exit 2) before Spark starts; its pass writes the typed columns Spark reads.
    """
    got = check_runs([path], spark_master=spark_master, elle_cli=elle_cli, write=write, perf=perf, out=out,
                     keep_going=False, on_perf=on_perf)[0]
    assert isinstance(got, CheckResult)
    return got


def _workdir() -> tempfile.TemporaryDirectory[str]:
    """Where a batch's columns go (removed with everything in it when the batch ends): under
    `$CHAOS_CHECK_TMPDIR`, else the system's temporary directory. With `--spark-master` on other
    hosts, point it at a directory the executors share, as the store itself must be."""
    base = os.environ.get("CHAOS_CHECK_TMPDIR") or None
    try:
        if base is not None:
            Path(base).mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix="chaos-check-", dir=base)
    except OSError as e:
        where = base or tempfile.gettempdir()
        raise EnvironmentProblem(f"cannot create the check's working directory under {where} "
                                 f"({e.strerror or e}); set CHAOS_CHECK_TMPDIR") from None


def check_runs(
    paths: list[Path],
    *,
    spark_master: str | None = None,
    elle_cli: str | None = None,
    write: bool = True,
    perf: bool = True,
    out: Path | None = None,
    keep_going: bool = True,
    on_perf: Callable[[Path], None] | None = None,
) -> list[CheckResult | ChaosError]:
    """Judge many histories as one Spark job (keyed by run), so the fixed costs are paid once.

    Each path gets its own result (written to its own results.json) in the order given; with
    `keep_going`, a path that cannot be judged (bad input, missing file) gets its error in its place
    and the others are still checked. `out` is only meaningful for a single path. `on_perf(dir)` is
    called, in a thread of its own while the Spark jobs run, for each directory whose perf facts were
    just written (what draws from them need not wait for the verdict).
    """
    if out is not None and len(paths) > 1:
        raise UsageError("--out names one directory; check several runs without it")
    from results.elle import elle_command
    from results.spark import check_master

    elle_command(elle_cli)  # a --elle-cli that is no command line is refused before any work
    check_master(spark_master)
    with _workdir() as tmp:
        prepared: list[_Run | ChaosError] = []
        for i, p in enumerate(paths):
            try:
                prepared.append(_prepare(p, out, write, i, Path(tmp)))
            except ChaosError as e:
                if not keep_going:
                    raise
                prepared.append(e)
        runs = [r for r in prepared if isinstance(r, _Run)]
        judged = [r for r in runs if r.facts.txn_ops > 0]
        batch = _judge(judged, spark_master, elle_cli, perf, on_perf) if judged else {}
    results: list[CheckResult | ChaosError] = []
    for r in prepared:
        if isinstance(r, ChaosError):
            results.append(r)
            continue
        try:
            results.append(_finish(r, batch))
        except ChaosError as e:  # this run's own step failed (its results.json, its commits): only it
            if not keep_going:
                raise
            results.append(e)
    return results


def _finish(r: _Run, batch: dict[int, Any]) -> CheckResult:
    """One run's verdict from the batch's findings (and its own commit checks), written."""
    if r.facts.txn_ops == 0:
        reason = ("the history holds no send, poll or txn op: nothing was tested, and Jepsen's checker calls "
                  "that invalid (empty-transaction-graph)")
        found = {EMPTY: {"count": 1, "examples": [{"client_ops": r.facts.client_ops}]}}
        result = CheckResult(False, found, [EMPTY], [*r.warnings, reason], {"status": "skipped", "detail": reason},
                             {}, r.dest, _rounded(r.timings))
    else:
        found, crashed, perf_summary, elle = batch[id(r)]
        found = {**found, **hanging_anomalies(r.files.test_json, EXAMPLES)}
        found = {**found, **_group_anomalies(r)}
        result = _verdict(r, found, crashed, perf_summary, elle)
    cov = read_coverage(r.files.replicas, bugs_of(r.files.test_json))
    if cov is not None:
        result = replace(result, coverage=cov.to_json())
    if missing := not_checked(r.files.test_json, r.replica_facts is not None, cov is not None):
        result = replace(result, not_checked=missing,
                         warnings=[*result.warnings, *(f"{k} not checked: {v}" for k, v in missing.items())])
    _write(result, r.dest)
    return result


def not_checked(test_json: dict[str, Any] | None, dumps: bool, probes: bool) -> dict[str, str]:
    """The checks a run's system gave no input for. The history's checks are every system's; the
    replica-dump comparison and coverage are what a system may add (`extras` in test.json's
    `system`), and a run of a system that has none says so for that part instead of passing it. A
    run of ours that lost its dumps (a crash mid-collect) says that, too."""
    system = (test_json or {}).get("system")
    if not isinstance(system, dict):  # a bare history, or a run from before systems were parts
        return {}
    extras, name = set(system.get("extras") or ()), system.get("name", "?")
    out = {}
    if not dumps:
        out["divergent-replicas"] = (f"system {name} gives no replica dumps" if "replica-dumps" not in extras
                                     else "the run stored no replica dumps")
    if not probes:
        out["coverage"] = (f"system {name} has no coverage probes" if "coverage" not in extras
                           else "the run stored no probe counts")
    return out


def _group_anomalies(r: _Run) -> dict[str, dict[str, Any]]:
    """The checks beside Spark that read the whole history as ops, one linear Python pass each over
    one reading of it: a subscribing group's commits (results/commits.py), and consume-transform-
    produce transactions (results/exactly_once.py; a skipped input is judged only after a complete
    drain, as `unseen` is)."""
    commits = "subscribe" in sub_via(r.files.test_json)
    if not commits and not r.facts.ctp_ops:
        return {}
    t0 = time.perf_counter()
    ops = list(read_ops(r.files.history))
    r.timings["group-ops"] = time.perf_counter() - t0
    found: dict[str, dict[str, Any]] = {}
    if commits:
        from results.commits import commit_anomalies

        t0 = time.perf_counter()
        found.update(commit_anomalies(ops, EXAMPLES))
        r.timings["commits"] = time.perf_counter() - t0
    if r.facts.ctp_ops:
        from results.exactly_once import exactly_once_anomalies

        t0 = time.perf_counter()
        drained = r.facts.drain_complete(r.files.test_json) and not r.incomplete
        found.update(exactly_once_anomalies(ops, EXAMPLES, drained=drained))
        r.timings["exactly-once"] = time.perf_counter() - t0
    return found


def _rounded(timings: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in timings.items()}


def _verdict(r: _Run, found: dict[str, dict[str, Any]], crashed: list[str], perf_summary: dict[str, Any],
             elle: dict[str, Any]) -> CheckResult:
    bad = bad_types(r.files.test_json, drained=r.facts.drain_complete(r.files.test_json) and not r.incomplete)
    warnings = list(r.warnings)
    gave_up = r.facts.drain_gave_up(r.files.test_json)
    if "unseen" in found and "unseen" not in bad:
        warnings.append("unseen values are not judged: the final drain gave up before the end of the log"
                        if gave_up else "unseen values are not judged: the history has no complete final drain")
    elif gave_up:
        warnings.append("the final drain gave up before the end of the log: what the log holds at the end was "
                        "not read, so writes lost after they were read cannot be ruled out")
    bad_found = sorted(t for t in found if t in bad or (t in CYCLE_BAD and found[t].get("without_ww", 0) > 0))
    if bad_found or elle["status"] == "invalid":
        valid: bool | str = False
    elif r.incomplete or crashed or elle["status"] == "unknown" or gave_up:
        # a drain that tried to read everything and could not leaves the unseen values unaccounted for,
        # and the end of the log unread: a topic that lost every record after its consumers read them
        # (Tansu's store losing its unsynced tail) left a history with no anomaly in it, judged valid
        valid = "unknown"
    else:
        valid = True
    return CheckResult(valid, found, bad_found, warnings, elle, perf_summary, r.dest, _rounded(r.timings))


def _judge(
    runs: list[_Run], spark_master: str | None, elle_cli: str | None, perf: bool,
    on_perf: Callable[[Path], None] | None = None,
) -> dict[int, tuple[dict[str, dict[str, Any]], list[str], dict[str, Any], dict[str, Any]]]:
    """The Spark jobs (and the elle-cli batch) for every run: per run, (anomalies, crashed checkers,
    perf summary, elle section). Timings of the shared phases are the batch's, and say so.

    What does not need Spark goes beside it, not after it (`results.background`): once the session is
    there, elle-cli's JVM runs in a thread of its own, and the perf facts come before the Spark jobs,
    so `on_perf(run_dir)` (the plots of `chaos run`) draws on the second core while Spark builds its
    table on the first."""
    from results.elle import run_elle_batch
    from results.frames import load_frames
    from results.spark import get_spark, spark_problem

    shared: dict[str, float] = {}
    job_warnings: list[str] = []
    t0 = time.perf_counter()
    nbytes = sum(r.files.history.stat().st_size for r in runs)
    # a JVM started here writes beside the one run it checks (a batch: the cache directory's spark.log).
    # First: a check that cannot have its session (no Java, a bad master) leaves nothing behind
    spark = get_spark(spark_master, nbytes, log_to=runs[0].dest / "spark.log"
                      if len(runs) == 1 and runs[0].dest else None)
    shared["spark_session"] = time.perf_counter() - t0
    histories = [(r.files.history, r.dest) for r in runs]
    elle_job = Task(partial(_timed, run_elle_batch, histories, elle_cli), "check-elle")
    t0 = time.perf_counter()
    perfs = _perf_facts(runs, perf, job_warnings)
    shared["perf"] = time.perf_counter() - t0
    # one thread draws every run's in turn: matplotlib is not made to draw from two threads at once
    drawing = Task(partial(_draw, on_perf, [d for d in (runs[i].dest for i in perfs) if d is not None]),
                   "check-plots")
    t0 = time.perf_counter()
    try:
        try:
            fr = load_frames(spark, [r.columns for r in runs], [r.replica_facts for r in runs if r.replica_facts],
                             nbytes)
        except Exception as e:  # building the keyed table is the job's biggest sort
            if (problem := spark_problem(spark, e)) is not None:
                raise EnvironmentProblem(problem) from None
            raise
        judged = judge_table(fr, [(r.run, r.columns) for r in runs])
        fr.unpersist()
    except Exception:
        # no elle-cli child left writing into a run directory after this process has said it failed
        elle_job.wait()
        drawing.wait()
        raise
    shared["checkers"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    elles, shared["elle"] = elle_job.result()
    drawing.result()
    shared["waited_for_elle_and_plots"] = time.perf_counter() - t0
    out = {}
    for i, r in enumerate(runs):
        r.warnings.extend(job_warnings + judged.warnings)
        r.timings.update(shared)
        if len(runs) > 1:
            r.timings["runs_in_job"] = len(runs)
        out[id(r)] = (judged.found.get(r.run, {}), judged.crashed, perfs.get(i, {}), elles[i].to_json())
    return out


def _timed(f: Callable[..., T], *args: Any) -> tuple[T, float]:
    t0 = time.perf_counter()
    got = f(*args)
    return got, time.perf_counter() - t0


def _perf_facts(runs: list[_Run], perf: bool, warnings: list[str]) -> dict[int, dict[str, Any]]:
    """Each written run's perf facts (`results.perf`, into its `perf/`), by its place in `runs`; a run
    whose facts fail gets a warning, and so does every run when the shared table fails."""
    perfs: dict[int, dict[str, Any]] = {}
    wanted = [i for i, r in enumerate(runs) if perf and r.dest is not None]
    if not wanted:
        return perfs
    from results.perf import perf_facts, perf_table  # pandas: only when perf facts are wanted

    try:
        table = perf_table([runs[i].columns for i in wanted])
        by_run = dict(tuple(table.groupby("run"))) if len(table) else {}
        for i in wanted:
            r = runs[i]
            rows = by_run.get(r.run, table.iloc[0:0])
            try:
                assert r.dest is not None
                perfs[i] = perf_facts(rows, r.dest / "perf", r.files.test_json)
            except Exception as e:
                r.warnings.append(f"performance facts failed: {type(e).__name__}: {e}")
    except Exception as e:
        warnings.append(f"performance facts failed: {type(e).__name__}: {e}")
    return perfs


def _draw(on_perf: Callable[[Path], None] | None, run_dirs: list[Path]) -> None:
    """`on_perf` of each directory; a failure is logged, never the verdict's business."""
    if on_perf is None:
        return
    for d in run_dirs:
        try:
            on_perf(d)
        except Exception as e:
            log.warning("drawing for %s failed: %s: %s", d, type(e).__name__, e)


def _write(result: CheckResult, dest: Path | None) -> None:
    if dest is None:
        return
    tmp = dest / "results.json.tmp"
    try:
        tmp.write_text(json.dumps(result.to_json(), indent=2, default=str))
        tmp.replace(dest / "results.json")
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {dest / 'results.json'}: {e.strerror or e}") from None


def print_verdict(result: CheckResult) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    table = Table("anomaly", "count", "bad?", "first example", title="check")
    for name, d in sorted(result.anomalies.items()):
        ex = json.dumps(d["examples"][0], default=str)[:70] if d["examples"] else ""
        table.add_row(name, str(d["count"]), "yes" if name in result.bad_error_types else "no", ex)
    if result.anomalies:
        console.print(table)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    if result.elle.get("status") not in (None, "skipped"):  # its absence was said once, at the start
        console.print(f"elle-cli: {result.elle.get('status')} ({result.elle.get('detail')})")
    label = describe(result.valid)
    colour = {"VALID": "green", "INVALID": "red"}.get(label, "yellow")
    if result.label != label:
        console.print(f"[yellow]{result.label}[/]")
    console.print(
        f"[bold {colour}]{label}[/]" + (f" — results in {result.run_dir / 'results.json'}" if result.run_dir else "")
    )


def print_summary(paths: list[Path], results: list[CheckResult | ChaosError]) -> int:
    """One line per run (verdict, anomalies, where its results went) and the worst exit code."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True)
    worst = 0
    counts: dict[str, int] = {}
    for path, r in zip(paths, results, strict=True):
        if isinstance(r, ChaosError):
            label, code, detail = "ERROR", r.exit_code, str(r)
        else:
            label, code = describe(r.valid), r.exit_code
            detail = ", ".join(r.bad_error_types or r.anomalies) or ""
            if note := verdict_note(r.coverage, r.valid):
                detail = f"{detail} ({note})".strip()
            if r.run_dir is not None:
                detail = f"{detail} — {r.run_dir / 'results.json'}" if detail else str(r.run_dir / "results.json")
        worst = max(worst, code)
        counts[label] = counts.get(label, 0) + 1
        colour = {"VALID": "green", "INVALID": "red"}.get(label, "yellow")
        console.print(f"[bold {colour}]{label:8}[/] {escape(str(path))}  {escape(detail)}", soft_wrap=True)
    console.print(f"{len(results)} checked: " + ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items()))
                  + f"; exit {worst}", soft_wrap=True)
    return worst
