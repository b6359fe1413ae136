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

from pyspark.sql import functions as F

from results.frames import Frames

NS = 1_000_000_000


def perf_facts(fr: Frames, out_dir: Path) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    comp = fr.comp.select(
        (F.col("time") / NS).alias("time_s"), (F.col("latency") / 1e6).alias("latency_ms"), "f", "type", "process"
    )
    comp.toPandas().to_parquet(out_dir / "latency.parquet")
    sec = F.floor(F.col("time_s")).cast("long").alias("second")
    rates = comp.groupBy(sec, "f", "type").count().orderBy("second")
    rates.toPandas().to_parquet(out_dir / "rates.parquet")
    avail = (
        comp.groupBy(sec)
        .agg(F.sum(F.when(F.col("type") == "ok", 1).otherwise(0)).alias("ok"), F.count("*").alias("total"))
        .withColumn("availability", F.col("ok") / F.col("total"))
        .orderBy("second")
    )
    avail_pd = avail.toPandas()
    avail_pd.to_parquet(out_dir / "availability.parquet")
    nem = fr.ops.where(F.col("process") == "nemesis").select("index", "time", "f", "value").orderBy("index").collect()
    oks = comp.where(F.col("type") == "ok").select("time_s").orderBy("time_s")
    windows: list[dict[str, Any]] = []
    open_: dict[str, Any] = {}
    for r in nem:
        kind = r["f"]
        if kind.startswith("start-"):
            open_[kind[len("start-") :]] = {
                "kind": kind[len("start-") :],
                "start_s": r["time"] / NS,
                "value": r["value"],
            }
        elif kind.startswith("stop-") or kind == "heal":
            keys = [kind[len("stop-") :]] if kind.startswith("stop-") else list(open_)
            for k in keys:
                w = open_.pop(k, None)
                if w is None:
                    continue
                w["end_s"] = r["time"] / NS
                first = oks.where(F.col("time_s") > w["end_s"]).first()
                w["recovery_s"] = (first["time_s"] - w["end_s"]) if first else None
                windows.append(w)
    for w in open_.values():
        w["end_s"] = None
        w["recovery_s"] = None
        windows.append(w)
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
