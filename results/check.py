"""`check_run`: validate a history, run every checker on Spark, fold in elle-cli, write results.json.

The verdict, like Jepsen's composite checker: any bad anomaly -> invalid (false); otherwise an
incomplete history (a crashed run, `test.json` marked incomplete) or a checker that crashed ->
"unknown"; otherwise valid (true). elle-cli, when installed, votes the same way; when it is not
installed its section says "skipped" and does not degrade the verdict — a missing optional tool
must not turn every nightly run "unknown"; its absence is printed with every verdict instead.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel.checker import describe
from kernel.errors import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, EnvironmentProblem, HistoryError, UsageError
from kernel.history import HistoryScan, scan

log = logging.getLogger(__name__)
EXAMPLES = 8
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
]


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
        return out


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
    import os

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


def bad_types(test_json: dict[str, Any] | None, *, drained: bool = True) -> list[str]:
    """Which anomalies invalidate this run. Non-idempotent producers may duplicate on retry, and
    `unseen` means something only when a final drain read everything (Jepsen judges it the same way):
    without one — a crashed run, a history from elsewhere — it is reported but not bad."""
    bad = list(ALWAYS_BAD)
    if not drained:
        bad.remove("unseen")
    cfg = (test_json or {}).get("config", test_json or {})
    if test_json is not None and cfg.get("idempotence") is False:
        bad.remove("duplicate")
    return bad


def _as_rows(name: str, df: Any) -> Any:
    from pyspark.sql import functions as F

    return df.select(F.lit(name).alias("type"), F.to_json(F.struct(*df.columns)).alias("ex"))


def _collect(parts: list[Any]) -> dict[str, dict[str, Any]]:
    """One Spark job for every checker: union their rows, count and sample per type."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not parts:
        return {}
    union = reduce(lambda a, b: a.unionByName(b), parts)
    rows = (
        union.groupBy("type")
        .agg(F.count("*").alias("n"), F.slice(F.collect_list("ex"), 1, EXAMPLES).alias("ex"))
        .collect()
    )
    return {r["type"]: {"count": int(r["n"]), "examples": [json.loads(x) for x in r["ex"]]} for r in rows}


def _run_checkers(fr: Any, warnings: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """All checkers in one job; if that job fails, one by one, so a crashing checker is named and
    reported "unknown" while the others still count (STYLE.md 7: a crash is never a pass)."""
    from results import anomalies

    built: dict[str, Any] = {}
    crashed: list[str] = []
    for name, fn in anomalies.CHECKERS.items():
        try:
            df = fn(fr)
        except Exception as e:
            crashed.append(name)
            warnings.append(f"checker {name} crashed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        if df is not None:
            built[name] = _as_rows(name, df)
    try:
        found = _collect(list(built.values()))
    except Exception:
        log.warning("the combined check job failed; running checkers one by one to find the culprit")
        found = {}
        for name, part in built.items():
            try:
                found.update(_collect([part]))
            except Exception as e:
                crashed.append(name)
                warnings.append(f"checker {name} crashed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    order = list(anomalies.CHECKERS)
    return {k: found[k] for k in sorted(found, key=order.index)}, crashed


def check_run(
    path: Path,
    *,
    spark_master: str | None = None,
    elle_cli: str | None = None,
    write: bool = True,
    perf: bool = True,
    out: Path | None = None,
) -> CheckResult:
    """Judge one history. Writes results.json/perf/ into the run directory (or `out`) when `write`.

    The strict reader runs first, in Python, so a malformed line stops the check with a
    HistoryError (exit 2) before Spark starts, and Spark only ever parses well-formed lines.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    files = locate(path, out)
    facts: HistoryScan = scan(files.history)
    timings["validate"] = time.perf_counter() - t0
    dest = files.out if write else None
    warnings = list(facts.warnings)
    incomplete = facts.incomplete
    if files.test_json is not None and files.test_json.get("complete") is False:
        warnings.append("test.json says the run did not complete")
        incomplete = True
    if facts.client_ops == 0:
        reason = "the history has no client operations: nothing was tested, so nothing can be judged"
        result = CheckResult("unknown", {}, [], [*warnings, reason], {"status": "skipped", "detail": reason},
                             {}, dest, timings)
        _write(result, dest)
        return result
    found, crashed, perf_summary, elle = _judge(files, dest, warnings, timings, spark_master, elle_cli, perf)
    bad = bad_types(files.test_json, drained=facts.final_ops > 0 and not incomplete)
    if "unseen" in found and "unseen" not in bad:
        warnings.append("unseen values are not judged: the history has no complete final drain")
    bad_found = sorted(t for t in found if t in bad)
    if bad_found or elle["status"] == "invalid":
        valid: bool | str = False
    elif incomplete or crashed or elle["status"] == "unknown":
        valid = "unknown"
    else:
        valid = True
    timings = {k: round(v, 3) for k, v in timings.items()}
    result = CheckResult(valid, found, bad_found, warnings, elle, perf_summary, dest, timings)
    _write(result, dest)
    return result


def _judge(
    files: RunFiles,
    dest: Path | None,
    warnings: list[str],
    timings: dict[str, float],
    spark_master: str | None,
    elle_cli: str | None,
    perf: bool,
) -> tuple[dict[str, dict[str, Any]], list[str], dict[str, Any], dict[str, Any]]:
    import tempfile

    from results import anomalies
    from results.elle import run_elle
    from results.frames import load_frames
    from results.perf import perf_facts
    from results.spark import get_spark

    t0 = time.perf_counter()
    spark = get_spark(spark_master)
    timings["spark_session"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fr = load_frames(spark, files.history, files.replicas)
    found, crashed = _run_checkers(fr, warnings)
    if "unseen" in found:
        per_key: dict[str, int] = {}
        for r in anomalies.unseen(fr).groupBy("key").count().collect():
            per_key[str(r["key"])] = r["count"]
        found["unseen"]["per_key"] = per_key
    timings["checkers"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    perf_summary: dict[str, Any] = {}
    if perf and dest is not None:
        try:
            perf_summary = perf_facts(fr, dest / "perf", files.test_json)
        except Exception as e:
            warnings.append(f"performance facts failed: {type(e).__name__}: {e}")
    fr.unpersist()
    timings["perf"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if dest is not None:
        elle = run_elle(files.history, dest, elle_cli).to_json()
    else:
        with tempfile.TemporaryDirectory(prefix="chaos-elle-") as tmp:
            elle = run_elle(files.history, Path(tmp), elle_cli).to_json()
    timings["elle"] = time.perf_counter() - t0
    return found, crashed, perf_summary, elle


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
    console.print(f"elle-cli: {result.elle.get('status')} ({result.elle.get('detail')})")
    label = describe(result.valid)
    colour = {"VALID": "green", "INVALID": "red"}.get(label, "yellow")
    console.print(
        f"[bold {colour}]{label}[/]" + (f" — results in {result.run_dir / 'results.json'}" if result.run_dir else "")
    )
