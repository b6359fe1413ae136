"""`render_run(run_dir)`: everything a person looks at for one run, from the files the check wrote.

Plots (from `perf/`), `report.html` (with its evidence pages), and the store's `index.html`
refreshed. It reads files only — `test.json`, `results.json`, `perf/`, the history through its one
reader, the replica dumps — so it runs the same after `chaos run`, after `chaos check`, or again
later on an old run. Called after the verdict is known; a failure here never changes a verdict.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from results.index import write_index
from results.plots import load_perf, write_plots
from results.report import write_report

log = logging.getLogger(__name__)


def store_of(run_dir: Path) -> Path | None:
    """The store a run directory belongs to, if it sits where the store puts runs
    (`store/<test name>/<run>/` with that name in its `test.json`); None for a directory elsewhere,
    so checking a copied run never writes an index.html into an unrelated parent directory."""
    try:
        cfg = json.loads((run_dir / "test.json").read_bytes()).get("config", {})
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(cfg, dict) and cfg.get("name") == run_dir.resolve().parent.name:
        return run_dir.resolve().parent.parent
    return None


def draw_plots(run_dir: Path) -> list[Path]:
    """The plots alone, from `perf/` (none when it does not exist): they need no verdict, so `chaos
    run` draws them while its Spark jobs run (`results.check.check_runs`' `on_perf`)."""
    if not (run_dir / "perf" / "latency.parquet").is_file():
        return []
    return write_plots(run_dir, load_perf(run_dir))


def render_run(run_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write the plots (when `perf/` exists; `plots=False`: already drawn by `draw_plots`), the
    report and the store index; return what was written."""
    written: list[Path] = []
    perf = None
    if (run_dir / "perf" / "latency.parquet").is_file():
        perf = load_perf(run_dir)
        if plots:
            written += write_plots(run_dir, perf)
    written.append(write_report(run_dir, perf))
    store = store_of(run_dir)
    if store is not None:
        written.append(write_index(store))
    return written
