"""`chaos analyze STORE`: many runs at once, on Spark — one row per configuration and night.

What it reads, per run directory of the store (`store/<name>/<run>/`):
- `test.json` and `results.json` (small; read on the driver): the configuration, the night, the
  verdict and the anomaly counts by type;
- `perf/faults.json` (small; driver): each fault window, its kind and its recovery time;
- `perf/latency.parquet` (one row per op; Spark): latency and outcome of every client op;
- `history.jsonl` (one line per op; Spark, parsed with the history's JVM-side schema
  `kernel.history.spark.OP_SCHEMA`, top-level fields only): op and `info` counts, and when the
  workers' last op completed, so the final drain is left out of the fault-window statistics.

What it writes into `OUT` (default `STORE/analysis/`): `analysis.parquet` and `analysis.csv` (the
table below), `runs.parquet` and `runs.csv` (the same facts per run), `trend-*.png` (each metric
across nights, one line per configuration) and `index.html` showing all of it.

Columns of the table, per (night, configuration):
`runs`, `valid`, `invalid`, `unknown`, `no_verdict` (crashed or stopped before the check);
`ops`, `info_ops`; `anomaly:<type>` — the sum of that anomaly's count over the runs;
`availability_in` / `availability_out` — ok ops / all ops invoked inside / outside any fault window;
`p99_ms_in` / `p99_ms_out` — the exact 99th percentile latency of those ok ops (pooled over runs);
`recovery_mean_s:<fault>` / `recovery_max_s:<fault>` — time from a fault's heal to the first ok op
after it, per fault kind (`kill-controller`, `partition-leader`, ...).

A configuration is a nightly's matrix cell (`workload/nemeses/config`, from `test.json`'s `nightly`);
for a run made by hand it is `<name>: <workload>/<nemeses>/<bugs>`. A night is the nightly's date,
else the local date the run started. Numbers are rounded to 6 decimals and rows sorted, so the same
store gives the same table on `local[*]` and on a Spark cluster (`--spark-master spark://...`,
with the store on storage every executor sees, as docs/design.md says).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from results.index import is_run_dir, verdict_of
from results.pages import render

DIGITS = 6
GROUP = ["night", "config"]


@dataclass(frozen=True)
class RunMeta:
    run: str  # absolute path of the run directory (the join key with the files Spark reads)
    name: str
    night: str
    config: str
    verdict: str
    has_perf: bool
    anomalies: dict[str, int]
    faults: list[dict[str, Any]]


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def configuration_of(test: dict[str, Any]) -> str:
    night = test.get("nightly")
    if isinstance(night, dict) and night.get("cell"):
        return str(night["cell"])
    cfg = test.get("config") if isinstance(test.get("config"), dict) else {}
    assert isinstance(cfg, dict)
    nem = ",".join(map(str, cfg.get("nemesis", []))) or "none"
    bugs = ",".join(map(str, cfg.get("bugs", []))) or "no-bugs"
    return f"{cfg.get('name', '?')}: {cfg.get('workload', '?')}/{nem}/{bugs}"


def night_of(test: dict[str, Any]) -> str:
    night = test.get("nightly")
    if isinstance(night, dict) and night.get("night"):
        return str(night["night"])
    started = test.get("started")
    return time.strftime("%Y-%m-%d", time.localtime(started)) if isinstance(started, int | float) else "unknown"


def fault_kind(w: dict[str, Any]) -> str:
    fam, kind = str(w.get("family") or "?"), str(w.get("kind") or "")
    return fam if not kind or kind == fam else f"{fam}-{kind}"


def discover(store: Path) -> list[RunMeta]:
    """Every run directory of the store (`store/<name>/<run>/` with a test.json), on the driver."""
    out: list[RunMeta] = []
    if not store.is_dir():
        return out
    for d in sorted(store.iterdir()):
        if d.name == "latest" or d.is_symlink() or not d.is_dir():
            continue
        for rd in sorted(d.iterdir()):
            if rd.is_symlink() or not rd.is_dir() or not is_run_dir(rd):
                continue
            test = _json(rd / "test.json")
            if not isinstance(test, dict):
                continue
            loaded = _json(rd / "results.json")
            results: dict[str, Any] | None = loaded if isinstance(loaded, dict) else None
            res: dict[str, Any] = results or {}
            anomalies = {t: int(res[t]["count"]) for t in res.get("error_types", [])
                         if isinstance(res.get(t), dict) and isinstance(res[t].get("count"), int)}
            faults = _json(rd / "perf" / "faults.json")
            out.append(RunMeta(str(rd.resolve()), rd.parent.name, night_of(test), configuration_of(test),
                               verdict_of(results, test), (rd / "perf" / "latency.parquet").is_file(), anomalies,
                               faults if isinstance(faults, list) else []))
    return out


def _run_key(col: Any, suffix: str) -> Any:
    """A file's run directory from Spark's `_metadata.file_path` (a `file:` URI)."""
    from pyspark.sql import functions as F

    path = F.url_decode(F.regexp_replace(col, "^file:/*", "/"))
    return F.regexp_replace(path, suffix.replace(".", "\\.") + "$", "")


def spark_tables(spark: Any, runs: list[RunMeta]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Spark job: (per night+configuration table, per run table) as pandas frames."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from kernel.history.spark import OP_SCHEMA

    meta = spark.createDataFrame(
        [(r.run, r.night, r.config, r.verdict) for r in runs],
        "run string, night string, config string, verdict string",
    )
    anomalies = spark.createDataFrame(
        [(r.run, t, n) for r in runs for t, n in r.anomalies.items()], "run string, type string, count long")
    windows = spark.createDataFrame(
        [(r.run, fault_kind(w), float(w["start_s"]), float(w["end_s"]) if w.get("end_s") is not None else math.inf,
          float(w["recovery_s"]) if w.get("recovery_s") is not None else None)
         for r in runs for w in r.faults if isinstance(w, dict) and isinstance(w.get("start_s"), int | float)],
        T.StructType([T.StructField("run", T.StringType()), T.StructField("fault", T.StringType()),
                      T.StructField("start_s", T.DoubleType()), T.StructField("end_s", T.DoubleType()),
                      T.StructField("recovery_s", T.DoubleType())]),
    )
    with_perf = [r for r in runs if r.has_perf]
    hist_paths = [f"{r.run}/history.jsonl" for r in with_perf if Path(r.run, "history.jsonl").is_file()]
    if hist_paths:
        ops = (spark.read.text(hist_paths)
               .select(_run_key(F.col("_metadata.file_path"), "/history.jsonl").alias("run"),
                       F.from_json("value", OP_SCHEMA).alias("j"))
               .select("run", "j.*").where(F.col("index").isNotNull() & (F.col("process") != "nemesis")))
        hist = ops.groupBy("run").agg(
            F.sum(F.when(F.col("type") != "invoke", 1).otherwise(0)).alias("ops"),
            F.sum(F.when(F.col("type") == "info", 1).otherwise(0)).alias("info_ops"),
            (F.max(F.when(F.coalesce(F.col("final"), F.lit(False)) == F.lit(False), F.col("time"))) / 1e9)
            .alias("workload_end_s"))
    else:
        hist = spark.createDataFrame([], "run string, ops long, info_ops long, workload_end_s double")
    lat_paths = [f"{r.run}/perf/latency.parquet" for r in with_perf]
    if lat_paths:
        lat = (spark.read.parquet(*lat_paths)
               .select(_run_key(F.col("_metadata.file_path"), "/perf/latency.parquet").alias("run"),
                       (F.col("time_s") - F.col("latency_ms") / 1000.0).alias("t"), "time_s", "latency_ms", "type"))
        # the workers' ops only: the final drain runs after every heal and would flatter "outside"
        lat = lat.join(hist.select("run", "workload_end_s"), "run", "left") \
            .where(F.col("workload_end_s").isNull() | (F.col("time_s") <= F.col("workload_end_s")))
    else:
        lat = spark.createDataFrame([], "run string, t double, time_s double, latency_ms double, type string")
    w = F.broadcast(windows.select(F.col("run").alias("w_run"), "start_s", "end_s"))
    cond = (lat["run"] == w["w_run"]) & (lat["t"] >= w["start_s"]) & (lat["t"] < w["end_s"])
    inside = lat.join(w, cond, "left_semi").withColumn("where", F.lit("in"))
    outside = lat.join(w, cond, "left_anti").withColumn("where", F.lit("out"))
    tagged = inside.unionByName(outside).join(meta.select("run", *GROUP), "run")

    def perf_by(keys: list[str]) -> Any:
        agg = tagged.groupBy(*keys, "where").agg(
            (F.sum(F.when(F.col("type") == "ok", 1).otherwise(0)) / F.count("*")).alias("availability"),
            F.percentile(F.when(F.col("type") == "ok", F.col("latency_ms")), F.lit(0.99)).alias("p99_ms"))
        return agg.groupBy(*keys).pivot("where", ["in", "out"]).agg(
            F.first("availability").alias("availability"), F.first("p99_ms").alias("p99_ms"))

    def recovery_by(keys: list[str]) -> Any:
        rec = windows.where(F.col("recovery_s").isNotNull()).join(meta.select("run", *GROUP), "run")
        return rec.groupBy(*keys).pivot("fault").agg(F.avg("recovery_s").alias("mean"),
                                                     F.max("recovery_s").alias("max"))

    verdicts = meta.groupBy(*GROUP).agg(
        F.count("*").alias("runs"),
        *[F.sum(F.when(F.col("verdict") == v, 1).otherwise(0)).alias(v) for v in ("valid", "invalid", "unknown")],
        F.sum(F.when(F.col("verdict").isin("valid", "invalid", "unknown"), 0).otherwise(1)).alias("no_verdict"))
    counts = hist.join(meta.select("run", *GROUP), "run").groupBy(*GROUP).agg(
        F.sum("ops").alias("ops"), F.sum("info_ops").alias("info_ops"))
    anom = anomalies.join(meta.select("run", *GROUP), "run").groupBy(*GROUP).pivot("type").agg(F.sum("count"))
    table = (verdicts.join(counts, GROUP, "left").join(anom, GROUP, "left").join(perf_by(GROUP), GROUP, "left")
             .join(recovery_by(GROUP), GROUP, "left"))
    per_run = (meta.join(hist, "run", "left")
               .join(anomalies.groupBy("run").pivot("type").agg(F.sum("count")), "run", "left")
               .join(perf_by(["run"]), "run", "left").join(recovery_by(["run"]), "run", "left"))
    return _tidy(table.toPandas(), GROUP), _tidy(per_run.toPandas(), ["night", "config", "run"])


def _tidy(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Stable names and order: `anomaly:<type>`, `availability_in`, `recovery_mean_s:<fault>`; rounded."""
    fixed = {"in_availability": "availability_in", "out_availability": "availability_out",
             "in_p99_ms": "p99_ms_in", "out_p99_ms": "p99_ms_out"}
    base = ["runs", "valid", "invalid", "unknown", "no_verdict", "verdict", "ops", "info_ops", "workload_end_s"]
    rename: dict[str, str] = {}
    for c in df.columns:
        if c in fixed:
            rename[c] = fixed[c]
        elif c.endswith("_mean") and c not in base:
            rename[c] = f"recovery_mean_s:{c[:-5]}"
        elif c.endswith("_max") and c not in base:
            rename[c] = f"recovery_max_s:{c[:-4]}"
        elif c not in keys and c not in base and c not in fixed.values():
            rename[c] = f"anomaly:{c}"
    df = df.rename(columns=rename)
    anomaly_cols = sorted(c for c in df.columns if c.startswith("anomaly:"))
    for c in anomaly_cols + [c for c in ("ops", "info_ops") if c in df.columns]:
        df[c] = df[c].fillna(0).astype("int64")
    rec_cols = sorted((c for c in df.columns if c.startswith("recovery_")), key=lambda c: (c.split(":")[1], c))
    order = [c for c in keys + base if c in df.columns] + anomaly_cols + [
        c for c in ("availability_in", "availability_out", "p99_ms_in", "p99_ms_out") if c in df.columns] + rec_cols
    df = df[order].sort_values(keys).reset_index(drop=True)
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            df[c] = df[c].round(DIGITS)
    return df


TRENDS = {
    "trend-availability.png": [("availability_in", "inside fault windows", "-"),
                               ("availability_out", "outside", "--")],
    "trend-p99.png": [("p99_ms_in", "inside fault windows", "-"), ("p99_ms_out", "outside", "--")],
    "trend-anomalies.png": [("invalid_fraction", "invalid runs / runs", "-")],
    "trend-recovery.png": [("recovery_max_s", "worst recovery over fault kinds", "-")],
}
TREND_YLABEL = {"trend-availability.png": "ok / ops", "trend-p99.png": "p99 latency of ok ops (ms)",
                "trend-anomalies.png": "fraction of runs invalid", "trend-recovery.png": "seconds after heal"}


def trend_plots(table: pd.DataFrame, out: Path) -> list[Path]:
    """One PNG per metric: nights on x, one line per configuration."""
    from matplotlib.figure import Figure

    t = table.copy()
    t["invalid_fraction"] = t["invalid"] / t["runs"]
    rec = [c for c in t.columns if c.startswith("recovery_max_s:")]
    t["recovery_max_s"] = t[rec].max(axis=1) if rec else float("nan")
    nights = sorted(t["night"].unique())
    xs = {n: i for i, n in enumerate(nights)}
    written = []
    for name, series in TRENDS.items():
        fig = Figure(figsize=(10, 4.2), dpi=100, layout="constrained")
        ax = fig.add_subplot()
        for i, (cfg, d) in enumerate(t.groupby("config", sort=True)):
            color = f"C{i % 10}"
            for col, what, ls in series:
                if col not in d.columns or d[col].isna().all():
                    continue
                d2 = d.sort_values("night")
                ax.plot([xs[n] for n in d2["night"]], d2[col], ls=ls, marker="o", color=color,
                        label=f"{cfg} — {what}" if len(series) > 1 else str(cfg))
        ax.set_xticks(range(len(nights)), nights, rotation=30 if len(nights) > 6 else 0)
        ax.set_xlim(-0.5, max(len(nights) - 0.5, 0.5))
        if name == "trend-p99.png":
            ax.set_yscale("log")
        ax.set_ylabel(TREND_YLABEL[name])
        ax.set_title(name.removeprefix("trend-").removesuffix(".png") + " across nights", loc="left", fontsize=11)
        ax.grid(True, alpha=0.3)
        if ax.get_lines():
            fig.legend(loc="outside right upper", fontsize=7, frameon=False)
        fig.savefig(out / name)
        written.append(out / name)
    return written


def _write_tables(df: pd.DataFrame, out: Path, stem: str) -> list[Path]:
    df.to_parquet(out / f"{stem}.parquet", index=False)
    df.to_csv(out / f"{stem}.csv", index=False)
    return [out / f"{stem}.parquet", out / f"{stem}.csv"]


def _html(table: pd.DataFrame, runs: int, master: str, plots: list[Path]) -> str:
    # pandas writes the table's markup (escaped); the template places it as it is
    return render("analysis.html", title="chaos analysis", runs=runs, master=master,
                  written=time.strftime("%Y-%m-%d %H:%M:%S"),
                  table=Markup(table.to_html(index=False, na_rep="-", table_id="analysis", border=0)),
                  plots=[{"src": p.name, "alt": p.stem} for p in plots])


@dataclass(frozen=True)
class Analysis:
    table: pd.DataFrame
    runs: pd.DataFrame
    written: list[Path]


def analyze(store: Path, out: Path | None = None, spark_master: str | None = None) -> Analysis:
    """The whole job: discover runs, one Spark pass, tables, trend plots, index.html."""
    from kernel.errors import UsageError
    from results.spark import get_spark

    runs = discover(store)
    if not runs:
        raise UsageError(f"{store} holds no runs (no <name>/<run>/test.json); name the --store of chaos run")
    out = out or store / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    spark = get_spark(spark_master)
    table, per_run = spark_tables(spark, runs)
    written = _write_tables(table, out, "analysis") + _write_tables(per_run, out, "runs")
    plots = trend_plots(table, out)
    (out / "index.html").write_text(_html(table, len(runs), spark.sparkContext.master, plots))
    return Analysis(table, per_run, written + plots + [out / "index.html"])
