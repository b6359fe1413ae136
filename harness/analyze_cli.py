"""`chaos analyze STORE [--spark-master URL]`: the cross-run table, Parquet + CSV + trend plots (results/analyze.py)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("store", type=click.Path(path_type=Path), default=Path("store"))
@click.option("--spark-master", default=None, help="Spark master URL, e.g. spark://host:7077 (default local[*]).")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Output directory [STORE/analysis].")
def analyze(store: Path, spark_master: str | None, out: Path | None) -> int:
    """One row per configuration and night: runs, anomalies by type, availability and p99 latency inside and
    outside fault windows, mean and worst recovery per fault kind. Writes analysis.parquet/.csv, runs.parquet/.csv,
    trend-*.png and index.html."""
    from results.analyze import analyze as run_analysis
    from results.index import write_index

    result = run_analysis(store, out, spark_master)
    t = result.table
    click.echo(f"{int(t['runs'].sum())} runs in {len(t)} (night, configuration) rows", err=True)
    cols = [c for c in ("night", "config", "runs", "valid", "invalid", "availability_in", "availability_out",
                        "p99_ms_in", "p99_ms_out") if c in t.columns]
    click.echo(t[cols].to_string(index=False))
    for p in result.written:
        if p.suffix in (".csv", ".html"):
            click.echo(f"wrote {p}", err=True)
    write_index(store)
    return 0
