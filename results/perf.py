"""Performance facts from the same history: latency per op, rates and availability per second, and
for each fault window the time from its end (heal) to the first `ok` after it.

Written to `perf/` in the run directory for the plots: `latency.parquet` (one row per completed
client op: time_s, latency_ms, f, type, process), `rates.parquet` (second, f, type, count),
`availability.parquet` (second, ok, total, availability), `faults.json` (windows and recovery).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import functions as F

from results.frames import Frames

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


def _pandas(df: Any) -> pd.DataFrame:
    """A Spark DataFrame as pandas (through Arrow); pyspark's stubs type it loosely."""
    out: pd.DataFrame = df.toPandas()
    return out


def _kind(value: Any, family: str) -> str:
    try:
        return str(json.loads(value).get("kind", family)) if isinstance(value, str) else family
    except (ValueError, AttributeError):
        return family


def perf_facts(fr: Frames, out_dir: Path, test_json: dict[str, Any] | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    comp = fr.comp.select(
        (F.col("time") / NS).alias("time_s"), (F.col("latency") / 1e6).alias("latency_ms"), "f", "type", "process"
    )
    _pandas(comp).to_parquet(out_dir / "latency.parquet")
    sec = F.floor(F.col("time_s")).cast("long").alias("second")
    rates = comp.groupBy(sec, "f", "type").count().orderBy("second")
    _pandas(rates).to_parquet(out_dir / "rates.parquet")
    avail = (
        comp.groupBy(sec)
        .agg(F.sum(F.when(F.col("type") == "ok", 1).otherwise(0)).alias("ok"), F.count("*").alias("total"))
        .withColumn("availability", F.col("ok") / F.col("total"))
        .orderBy("second")
    )
    avail_pd = _pandas(avail)
    avail_pd.to_parquet(out_dir / "availability.parquet")
    nem = fr.ops.where(F.col("process") == "nemesis").select("index", "time", "f", "value", "fault").orderBy("index")
    windows = fault_windows([r.asDict() for r in nem.collect()], _family_perf(test_json))
    oks = comp.where(F.col("type") == "ok").select("time_s")
    ends = [(w["fault"], w["end_s"]) for w in windows if w["end_s"] is not None]
    first_ok: dict[str, float] = {}
    if ends:
        ends_df = comp.sparkSession.createDataFrame(ends, "fault string, end_s double")
        rows = oks.crossJoin(F.broadcast(ends_df)).where(F.col("time_s") > F.col("end_s"))
        first_ok = {r["fault"]: r["t"] for r in rows.groupBy("fault").agg(F.min("time_s").alias("t")).collect()}
    for w in windows:
        t = first_ok.get(w["fault"]) if w["end_s"] is not None else None
        w["recovery_s"] = (t - w["end_s"]) if t is not None else None
    (out_dir / "faults.json").write_text(json.dumps(windows, indent=1))
    lat = (
        comp.where(F.col("type") == "ok")
        .agg(
            F.expr("percentile_approx(latency_ms, 0.5)").alias("p50"),
            F.expr("percentile_approx(latency_ms, 0.99)").alias("p99"),
            F.max("latency_ms").alias("max"),
        )
        .first()
    )
    total_s = float(avail_pd["second"].max() + 1) if len(avail_pd) else 0.0
    n_ok = int(avail_pd["ok"].sum()) if len(avail_pd) else 0
    return {
        "ok_latency_ms": {"p50": lat["p50"], "p99": lat["p99"], "max": lat["max"]} if lat else None,
        "ok_per_s": (n_ok / total_s) if total_s else 0.0,
        "availability": (n_ok / float(avail_pd["total"].sum())) if len(avail_pd) else None,
        "fault_windows": len(windows),
        "max_recovery_s": max((w["recovery_s"] for w in windows if w["recovery_s"] is not None), default=None),
    }
