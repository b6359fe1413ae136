"""Flat, typed Spark tables built from history.jsonl and replica dumps.

The history's `value` mixes types (`["send", k, [offset, v]]`, `["poll", {"k": [[o, v], ...]}]`),
which no Spark schema can hold, so we parse in two steps inside the JVM: the op with `value` as raw
JSON text, then each micro-op as an array of raw JSON strings, then each part with its own schema.
Everything after that is joins and windows.

Tables (all keys/offsets/values are longs, process is a string):
- `ops`: every line; `comp`: client completions paired with their invokes (latency, values);
- `sends`: one row per send micro-op: process, op index, type, key, value, offset (ok only), pos;
- `polls`: one row per value read: process, op index, key, offset, value, pos within the key's list;
- `assigns`: ok assign ops; `replicas`: committed records of every dumped replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kernel.history.spark import client_tables

REPLICA_SCHEMA = T.StructType(
    [
        T.StructField("offset", T.LongType()),
        T.StructField("epoch", T.LongType()),
        T.StructField("value", T.StringType()),
        T.StructField("hw", T.LongType()),
        T.StructField("leo", T.LongType()),
        T.StructField("partition", T.LongType()),
    ]
)


@dataclass
class Frames:
    ops: DataFrame
    comp: DataFrame
    sends: DataFrame
    polls: DataFrame
    assigns: DataFrame
    replicas: DataFrame | None
    version_order: DataFrame

    def unpersist(self) -> None:
        for df in (self.comp, self.sends, self.polls, self.version_order):
            df.unpersist()


def load_frames(spark: Any, history: Path, replicas_dir: Path | None) -> Frames:
    t = client_tables(spark, history)
    ops, comp, sends, polls, assigns = t.ops, t.comp, t.sends, t.polls, t.assigns
    reps = load_replicas(spark, replicas_dir) if replicas_dir is not None and replicas_dir.is_dir() else None
    vo = (
        sends.where(F.col("offset").isNotNull())
        .select("key", "offset")
        .unionByName(polls.select("key", "offset"))
        .distinct()
        .select("key", "offset", (F.dense_rank().over(Window.partitionBy("key").orderBy("offset")) - 1).alias("idx"))
        .cache()
    )
    return Frames(ops, comp, sends, polls, assigns, reps, vo)


def load_replicas(spark: Any, replicas_dir: Path) -> DataFrame | None:
    """Committed records (offset < HW) of every `replicas/<node>/<topic>-<p>.jsonl`."""
    files = sorted(replicas_dir.glob("*/*.jsonl"))
    if not files:
        return None
    raw = spark.read.schema(REPLICA_SCHEMA).json([str(f) for f in files]).withColumn("file", F.input_file_name())
    node = F.regexp_extract("file", r"/([^/]+)/[^/]+\.jsonl$", 1)
    key = F.regexp_extract("file", r"-(\d+)\.jsonl$", 1).cast("long")
    tagged = raw.select("*", node.alias("node"), key.alias("key"))
    summary = tagged.where(F.col("hw").isNotNull()).select("node", "key", "hw", "leo")
    records = tagged.where(F.col("offset").isNotNull()).select(
        "node", "key", "offset", "epoch", F.col("value").cast("long").alias("value")
    )
    return records.join(summary, ["node", "key"]).where(F.col("offset") < F.col("hw"))
