"""Performance facts from the same history: latency per op, rates and availability per second, and
for each fault window the time from its end (heal) to the first `ok` after it.

Written to `perf/` in the run directory for the plots: `latency.parquet` (one row per completed
client op: time_s, latency_ms, f, type, process), `rates.parquet` (second, f, type, count),
`availability.parquet` (second, ok, total, availability), `faults.json` (windows and recovery).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from kernel.history.columns import OPS, ColumnFiles

NS = 1_000_000_000


def _family_perf(test_json: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    """Each fault family's plot metadata (start/stop op names, label, colour), as the run saved it."""
    perf = (test_json or {}).get("nemesis_perf")
    return perf if isinstance(perf, dict) else {}


def fault_windows(nemesis_ops: list[dict[str, Any]], families: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """Fault windows from nemesis ops, paired by their `fault` id (faults may overlap, so never by
    name). A start whose stop never came ends at the next `heal` (or stays open: `end_s` null).
    `families` maps a family to its `start`/`stop` op names, `label` and `color`; a history without
    that table (from elsewhere) still pairs by id and is labelled by the start op's name. Ops without
    a `fault` id (Jepsen's histories have none, and never overlap faults of one family) pair by family."""
    by_start = {m["start"]: fam for fam, m in families.items() if "start" in m}
    by_stop = {m["stop"]: fam for fam, m in families.items() if "stop" in m}
    open_: dict[str, dict[str, Any]] = {}
    windows: list[dict[str, Any]] = []
    for r in nemesis_ops:
        f, fid, t = r["f"], r.get("fault"), r["time"] / NS
        if f == "heal":
            for w in open_.values():
                w["end_s"] = t
                windows.append(w)
            open_.clear()
            continue
        is_stop, is_start = f in by_stop or f.startswith("stop-"), f in by_start or f.startswith("start-")
        if fid is None and (is_stop or is_start):
            fam = by_stop.get(f) or by_start.get(f) or f.split("-", 1)[1]
            fid = f"{fam}#{sum(1 for w in windows if w['family'] == fam)}"
        if fid is None:
            continue
        fid = str(fid)
        if fid in open_ and is_stop:
            w = open_.pop(fid)
            w["end_s"] = t
            windows.append(w)
        elif fid not in open_ and is_start:
            fam = by_start.get(f, f.removeprefix("start-"))
            meta = families.get(fam, {})
            value = r.get("value")
            open_[fid] = {"fault": fid, "family": fam, "kind": _kind(value, fam), "label": meta.get("label", fam),
                          "color": meta.get("color"), "start_s": t, "end_s": None, "value": value}
    windows.extend(open_.values())
    return sorted(windows, key=lambda w: w["start_s"])


def fault_name(w: dict[str, Any]) -> str:
    """`kill-controller`, `partition-halves`: the family-kind name the CLI uses for a window."""
    fam, kind = str(w.get("family", "")), str(w.get("kind", ""))
    return fam if not kind or kind == fam else f"{fam}-{kind}"


def fault_counts(windows: list[dict[str, Any]]) -> dict[str, int]:
    """How many faults of each name the run injected: what happened, not what the mix could draw."""
    counts: dict[str, int] = {}
    for w in windows:
        counts[fault_name(w)] = counts.get(fault_name(w), 0) + 1
    return dict(sorted(counts.items()))


def _kind(value: Any, family: str) -> str:
    try:
        return str(json.loads(value).get("kind", family)) if isinstance(value, str) else family
    except (ValueError, AttributeError):
        return family


def perf_table(columns: Sequence[ColumnFiles]) -> pd.DataFrame:
    """Client completions (time, latency) and nemesis ops of every run of the job, as pandas rows with
    their `run`, straight from the columns the reader's pass wrote (no Spark job: they are one row per
    op, read as Arrow); `perf_facts` then works per run."""
    tables = [pq.read_table(c.ops) for c in columns]
    out: pd.DataFrame = (pa.concat_tables(tables) if tables else OPS.empty_table()).to_pandas()
    return out


def perf_facts(rows: pd.DataFrame, out_dir: Path, test_json: dict[str, Any] | None = None) -> dict[str, Any]:
    """`perf/` for one run from its rows of `perf_table`, and the summary for results.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    is_nem = rows["process"] == "nemesis"
    comp = rows[~is_nem]
    lat_df = pd.DataFrame({
        "time_s": comp["time"].to_numpy() / NS,
        "latency_ms": comp["latency"].to_numpy() / 1e6,
        "f": comp["f"].to_numpy(),
        "type": comp["type"].to_numpy(),
        "process": comp["process"].to_numpy(),
    })
    lat_df.to_parquet(out_dir / "latency.parquet")
    second = (lat_df["time_s"] // 1).astype("int64")
    rates = (lat_df.assign(second=second).groupby(["second", "f", "type"]).size().rename("count").reset_index()
             .sort_values("second", kind="stable").reset_index(drop=True))
    rates.to_parquet(out_dir / "rates.parquet")
    ok = (lat_df["type"] == "ok").astype("int64")
    avail_pd = (pd.DataFrame({"second": second, "ok": ok}).groupby("second")
                .agg(ok=("ok", "sum"), total=("ok", "size")).reset_index())
    avail_pd["availability"] = avail_pd["ok"] / avail_pd["total"]
    avail_pd.to_parquet(out_dir / "availability.parquet")
    nem = rows[is_nem].sort_values("index")
    nem_ops = [{"index": int(r.index), "time": int(r.time), "f": r.f, "value": r.value,
                "fault": None if pd.isna(r.fault) else r.fault} for r in nem.itertuples()]
    windows = fault_windows(nem_ops, _family_perf(test_json))
    ok_times = lat_df.loc[lat_df["type"] == "ok", "time_s"].sort_values().to_numpy()
    for w in windows:
        w["recovery_s"] = None
        if w["end_s"] is not None:
            after = ok_times[ok_times > w["end_s"]]
            if len(after):
                w["recovery_s"] = float(after[0]) - w["end_s"]
    (out_dir / "faults.json").write_text(json.dumps(windows, indent=1))
    ok_lat = lat_df.loc[lat_df["type"] == "ok", "latency_ms"]
    lat = ({"p50": float(ok_lat.quantile(0.5, interpolation="lower")),
            "p99": float(ok_lat.quantile(0.99, interpolation="lower")), "max": float(ok_lat.max())}
           if len(ok_lat) else None)
    total_s = float(avail_pd["second"].max() + 1) if len(avail_pd) else 0.0
    n_ok = int(avail_pd["ok"].sum()) if len(avail_pd) else 0
    return {
        "ok_latency_ms": lat,
        "ok_per_s": (n_ok / total_s) if total_s else 0.0,
        "availability": (n_ok / float(avail_pd["total"].sum())) if len(avail_pd) else None,
        "fault_windows": len(windows),
        "faults": fault_counts(windows),
        "max_recovery_s": max((w["recovery_s"] for w in windows if w["recovery_s"] is not None), default=None),
    }
