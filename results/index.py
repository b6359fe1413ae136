"""The store's front page: `store/index.html` lists every run, newest first, filterable.

A run is a directory `store/<name>/<stamp>-<seed>/` holding `test.json` (DESIGN.md). Its summary is
read from `test.json` and `results.json` only — never the history — so the index of a store with a
thousand runs is written in well under a second. A run with no `results.json` was stopped or crashed
before its check; it is listed as such, never as valid.

The page is static HTML (it works from disk); a few lines of inline JavaScript filter rows by name
and verdict, and without JavaScript every row is simply shown. `runs_table` is shared with the
nightly summary (`harness/nightly.py`), which lists its own runs, including the ones it skipped.
"""

from __future__ import annotations

import html
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERDICT_COLORS = {
    "valid": "#2E7D32",
    "invalid": "#C62828",
    "unknown": "#B26A00",
    "incomplete": "#6D4C41",
    "crashed": "#6A1B9A",
    "skipped": "#757575",
}

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; margin: 0 0 .4em; } h2 { font-size: 1.15em; margin: 1.4em 0 .5em; }
table { border-collapse: collapse; margin: .4em 0 1em; } td, th { padding: .25em .7em; text-align: left;
  border-bottom: 1px solid #ddd; vertical-align: top; } th { background: #f3f3f3; }
.verdict { display: inline-block; padding: .1em .55em; border-radius: .3em; color: #fff; font-weight: 600;
  font-size: .85em; letter-spacing: .03em; }
code, pre { font: 12.5px ui-monospace, monospace; } pre { background: #f6f6f6; padding: .6em .8em;
  overflow-x: auto; } .muted { color: #777; } .filters { margin: .5em 0 1em; }
.filters input, .filters select { font: inherit; padding: .2em .4em; margin-right: 1em; }
"""


def badge(verdict: str) -> str:
    color = VERDICT_COLORS.get(verdict, "#555")
    return f'<span class="verdict" style="background:{color}">{html.escape(verdict.upper())}</span>'


def page(title: str, body: str) -> str:
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n")


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
    nemesis: list[str] = field(default_factory=list)
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
            bugs=[str(x) for x in cfg.get("bugs", [])],
            note=note,
        )


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


def runs_table(rows: Iterable[RunSummary], base: Path, *, extra: dict[str, str] | None = None) -> str:
    """A filterable table of runs; links are relative to `base` (where the page is written).
    `extra` maps a run's path to one more cell (the nightly's matrix label)."""
    head = "<th>verdict</th><th>name</th>" + ("<th>cell</th>" if extra is not None else "") + (
        "<th>started</th><th>seed</th><th>workload</th><th>nemeses</th><th>bugs</th><th>duration</th>"
        "<th>anomalies</th>")
    out = ['<table id="runs">', f"<thead><tr>{head}</tr></thead><tbody>"]
    for r in rows:
        target = r.path / "report.html" if r.has_report else r.path
        link = html.escape(os.path.relpath(target, base))
        anomalies = ", ".join(r.bad_error_types or r.error_types) or (r.note and f'<span class="muted">'
                                                                                f'{html.escape(r.note)}</span>')
        cell = f"<td>{html.escape(extra.get(str(r.path), ''))}</td>" if extra is not None else ""
        out.append(
            f'<tr class="run" data-name="{html.escape(r.name)}" data-verdict="{r.verdict}">'
            f"<td>{badge(r.verdict)}</td><td><a href=\"{link}\">{html.escape(r.name)}</a>"
            f'<br><span class="muted">{html.escape(r.path.name)}</span></td>{cell}'
            f"<td>{_when(r.started)}</td><td>{html.escape(str(r.seed))}</td><td>{html.escape(r.workload)}</td>"
            f"<td>{html.escape(', '.join(r.nemesis) or '-')}</td><td>{html.escape(', '.join(r.bugs) or '-')}</td>"
            f"<td>{_dur(r.duration_s)}</td><td>{anomalies or ''}</td></tr>"
        )
    out.append("</tbody></table>")
    return "\n".join(out)


FILTER = """<div class="filters">
<label>name <input id="f-name" type="search" placeholder="filter by name"></label>
<label>verdict <select id="f-verdict"><option value="">any</option>{options}</select></label>
<span id="f-count" class="muted"></span></div>
<script>
(function () {{
  var name = document.getElementById('f-name'), verdict = document.getElementById('f-verdict');
  function apply() {{
    var n = name.value.toLowerCase(), v = verdict.value, shown = 0, rows = document.querySelectorAll('tr.run');
    rows.forEach(function (r) {{
      var ok = r.dataset.name.toLowerCase().indexOf(n) >= 0 && (!v || r.dataset.verdict === v);
      r.style.display = ok ? '' : 'none'; if (ok) shown++;
    }});
    document.getElementById('f-count').textContent = shown + ' of ' + rows.length + ' runs';
  }}
  name.addEventListener('input', apply); verdict.addEventListener('change', apply); apply();
}})();
</script>"""


def filter_controls() -> str:
    options = "".join(f'<option value="{v}">{v}</option>' for v in VERDICT_COLORS)
    return FILTER.format(options=options)


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
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no runs yet"
    parts = [f"<h1>chaos runs</h1><p class=\"muted\">{html.escape(str(store.resolve()))} — {len(runs)} runs: "
             f"{html.escape(summary)}; written {_when(time.time())}</p>"]
    nightly = _nightlies(store)
    analysis = store / "analysis" / "index.html"
    if nightly or analysis.is_file():
        links = [f'<li><a href="{html.escape(os.path.relpath(p, store))}">{html.escape(p.parent.name)}</a></li>'
                 for p in nightly]
        if analysis.is_file():
            links.insert(0, '<li><a href="analysis/index.html">cross-run analysis</a></li>')
        parts.append("<h2>nightlies and analysis</h2><ul>" + "".join(links) + "</ul>")
    parts.append("<h2>runs</h2>" + filter_controls() + runs_table(runs, store))
    out = store / "index.html"
    store.mkdir(parents=True, exist_ok=True)
    tmp = store / ".index.html.tmp"
    tmp.write_text(page("chaos runs", "\n".join(parts)))
    tmp.replace(out)
    return out
