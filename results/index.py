"""The store's front page: `store/index.html` lists every run, newest first, filterable.

A run is a directory `store/<name>/<stamp>-<seed>/` holding `test.json`
(docs/design.md, "The run store"). Its summary is
read from `test.json` and `results.json` only — never the history — so the index of a store with a
thousand runs is written in well under a second. A run with no `results.json` was stopped or crashed
before its check; it is listed as such, never as valid.

The page is static HTML (it works from disk), rendered from `templates/index.html`; a few lines of
inline JavaScript filter rows by name and verdict, and without JavaScript every row is simply shown.
The "faults injected" column is what the run did (counted by its check from the history's nemesis
ops), not the families its mix could draw from (those are the cell's tooltip).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from results.pages import render, write_page


def verdict_of(results: dict[str, Any] | None, test: dict[str, Any]) -> str:
    """valid / invalid / unknown from results.json; without one, why there is none: a harness error
    ("crashed"), or a run that stopped or is still going ("incomplete": no verdict yet, never valid)."""
    if results is not None:
        v = results.get("valid")
        return "valid" if v is True else "invalid" if v is False else "unknown"
    if test.get("error"):
        return "crashed"
    if test.get("interrupted") or test.get("complete") is False:
        return "incomplete"
    return "unknown"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        d = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


@dataclass
class RunSummary:
    """One run as a list shows it."""

    path: Path
    name: str
    seed: Any
    started: float | None
    duration_s: float | None
    verdict: str
    error_types: list[str] = field(default_factory=list)
    bad_error_types: list[str] = field(default_factory=list)
    workload: str = ""
    nemesis: list[str] = field(default_factory=list)  # the families the run could draw from
    faults: dict[str, int] | None = None  # what it injected, by name (None: the run was not checked)
    bugs: list[str] = field(default_factory=list)
    note: str = ""  # why a run has no verdict: its error, or where it stopped

    @property
    def has_report(self) -> bool:
        return (self.path / "report.html").is_file()

    @classmethod
    def load(cls, run_dir: Path) -> RunSummary | None:
        test = _read_json(run_dir / "test.json")
        if test is None:
            return None
        results = _read_json(run_dir / "results.json")
        cfg: dict[str, Any] = test["config"] if isinstance(test.get("config"), dict) else {}
        phases: dict[str, Any] = test["phases"] if isinstance(test.get("phases"), dict) else {}
        duration = sum(float(v) for v in phases.values() if isinstance(v, int | float)) if phases else None
        note = str(test.get("error") or "")
        if not note and test.get("interrupted"):
            note = f"stopped by {test['interrupted']} during {test.get('stopped_in')}"
        return cls(
            path=run_dir,
            name=str(cfg.get("name", run_dir.parent.name)),
            seed=test.get("seed", cfg.get("seed")),
            started=test.get("started") if isinstance(test.get("started"), int | float) else None,
            duration_s=duration,
            verdict=verdict_of(results, test),
            error_types=list((results or {}).get("error_types", [])),
            bad_error_types=list((results or {}).get("bad_error_types", [])),
            workload=str(cfg.get("workload", "")),
            nemesis=[str(x) for x in cfg.get("nemesis", [])],
            faults=run_faults(results),
            bugs=[str(x) for x in cfg.get("bugs", [])],
            note=note,
        )


def run_faults(results: dict[str, Any] | None) -> dict[str, int] | None:
    """The faults a checked run injected, by name, as its check counted them (results.json's perf)."""
    faults = ((results or {}).get("perf") or {}).get("faults")
    if not isinstance(faults, dict):
        return None
    return {str(k): int(v) for k, v in faults.items() if isinstance(v, int) and not isinstance(v, bool)}


def is_run_dir(path: Path) -> bool:
    return (path / "test.json").is_file()


def scan_store(store: Path) -> list[RunSummary]:
    """Every run under `store/<name>/<run>/`, newest first. `latest` (a link) is skipped."""
    runs: list[RunSummary] = []
    if not store.is_dir():
        return runs
    for name in sorted(os.listdir(store)):
        d = store / name
        if name == "latest" or d.is_symlink() or not d.is_dir() or name.startswith("."):
            continue
        for run in sorted(os.listdir(d)):
            rd = d / run
            if rd.is_dir() and not rd.is_symlink() and is_run_dir(rd):
                s = RunSummary.load(rd)
                if s is not None:
                    runs.append(s)
    runs.sort(key=lambda r: (r.started or 0.0, str(r.path)), reverse=True)
    return runs


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "?"


def _dur(s: float | None) -> str:
    if s is None:
        return "?"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def run_row(r: RunSummary, base: Path) -> dict[str, Any]:
    """What the runs table shows of one run; links are relative to `base` (where the page is written)."""
    target = r.path / "report.html" if r.has_report else r.path
    return {
        "name": r.name, "dir": r.path.name, "verdict": r.verdict, "href": os.path.relpath(target, base),
        "started": _when(r.started), "seed": str(r.seed), "workload": r.workload,
        "families": ", ".join(r.nemesis), "faults": r.faults, "bugs": ", ".join(r.bugs),
        "duration": _dur(r.duration_s), "anomalies": ", ".join(r.bad_error_types or r.error_types), "note": r.note,
    }


def _nightlies(store: Path) -> list[Path]:
    """Nightly summaries: directories holding a `nightly.json` (harness/nightly.py writes them)."""
    return sorted((p.parent / "index.html" for p in store.glob("*/nightly.json")
                   if (p.parent / "index.html").is_file()), key=lambda p: p.stat().st_mtime, reverse=True)


def write_index(store: Path) -> Path:
    """Write `store/index.html` (atomically) and return its path."""
    runs = scan_store(store)
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    nightlies = [{"href": os.path.relpath(p, store), "name": p.parent.name} for p in _nightlies(store)]
    text = render(
        "index.html", title="chaos runs", store=str(store.resolve()), written=_when(time.time()),
        summary=", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no runs yet",
        runs=[run_row(r, store) for r in runs], nightlies=nightlies,
        analysis=(store / "analysis" / "index.html").is_file(),
    )
    return write_page(store / "index.html", text)
