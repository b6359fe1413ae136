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

from harness.errors import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, HistoryError
from results.validate import Validation, validate_history

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
    root: Path
    history: Path
    test_json: dict[str, Any] | None
    replicas: Path | None


def locate(path: Path) -> RunFiles:
    """A run dir, a dir holding history.jsonl, or a history file itself."""
    if path.is_dir():
        hist = path / "history.jsonl"
        root = path
    elif path.is_file():
        hist, root = path, path.parent
    else:
        raise HistoryError(f"{path} does not exist")
    if not hist.is_file():
        raise HistoryError(f"{path} has no history.jsonl")
    tj = None
    if (root / "test.json").is_file() and hist.name == "history.jsonl":
        try:
            tj = json.loads((root / "test.json").read_text())
        except ValueError as e:
            raise HistoryError(f"{root / 'test.json'} is not valid JSON: {e}") from None
    reps = root / "replicas" if (root / "replicas").is_dir() and hist.name == "history.jsonl" else None
    return RunFiles(root, hist, tj, reps)


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
    path: Path, *, spark_master: str | None = None, elle_cli: str | None = None, write: bool = True, perf: bool = True
) -> CheckResult:
    from results import anomalies
    from results.elle import run_elle
    from results.frames import load_frames
    from results.perf import perf_facts
    from results.spark import get_spark

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    files = locate(path)
    val: Validation = validate_history(files.history)
    timings["validate"] = time.perf_counter() - t0
    warnings = list(val.warnings)
    incomplete = val.incomplete
    if files.test_json is not None and files.test_json.get("complete") is False:
        warnings.append("test.json says the run did not complete")
        incomplete = True
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
    if perf and write:
        try:
            perf_summary = perf_facts(fr, files.root / "perf")
        except Exception as e:
            warnings.append(f"performance facts failed: {type(e).__name__}: {e}")
    fr.unpersist()
    timings["perf"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    elle = run_elle(files.history, files.root, elle_cli).to_json()
    timings["elle"] = time.perf_counter() - t0
    bad = bad_types(files.test_json, drained=val.final_ops > 0 and not incomplete)
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
    result = CheckResult(valid, found, bad_found, warnings, elle, perf_summary, files.root, timings)
    if write:
        (files.root / "results.json").write_text(json.dumps(result.to_json(), indent=2, default=str))
    return result


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
    colour = {True: "green", False: "red"}.get(result.valid, "yellow")  # type: ignore[call-overload]
    label = {True: "VALID", False: "INVALID"}.get(result.valid, "UNKNOWN")  # type: ignore[call-overload]
    console.print(
        f"[bold {colour}]{label}[/]" + (f" — results in {result.run_dir / 'results.json'}" if result.run_dir else "")
    )
