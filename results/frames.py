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

OP_SCHEMA = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("time", T.LongType()),
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("value", T.StringType()),
        T.StructField("final", T.BooleanType()),
    ]
)
POLL_MAP = "map<string,array<array<long>>>"
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
    lines = spark.read.text(str(history)).where(F.length(F.trim("value")) > 0)
    ops = lines.select(F.from_json("value", OP_SCHEMA).alias("j")).select("j.*").where(F.col("index").isNotNull())
    client = ops.where(F.col("process") != "nemesis")
    w = Window.partitionBy("process").orderBy("index")
    paired = client.select(
        "*",
        F.lag("index").over(w).alias("inv_index"),
        F.lag("time").over(w).alias("inv_time"),
        F.lag("value").over(w).alias("inv_value"),
        F.lag("type").over(w).alias("inv_type"),
    )
    comp = (
        paired.where((F.col("type") != "invoke") & (F.col("inv_type") == "invoke"))
        .select(
            "index",
            "inv_index",
            "process",
            "type",
            "f",
            "time",
            "inv_time",
            (F.col("time") - F.col("inv_time")).alias("latency"),
            "value",
            "inv_value",
            F.coalesce("final", F.lit(False)).alias("final"),
        )
        .cache()
    )
    # unfinished invokes (a crashed run) count as info: their sends may have happened
    unfinished = (
        paired.select("*", F.lead("type").over(w).alias("next_type"))
        .where((F.col("type") == "invoke") & F.col("next_type").isNull())
        .select(
            F.col("index").alias("inv_index"),
            "process",
            F.lit("info").alias("type"),
            "f",
            F.col("value").alias("inv_value"),
            F.lit(None).cast("string").alias("value"),
            "index",
        )
    )
    send_src = comp.select("inv_index", "process", "type", "f", "inv_value", "value", "index").unionByName(unfinished)
    sends = (
        send_src.where(F.col("f").isin("send", "txn"))
        .select(
            "process",
            "index",
            "type",
            F.posexplode(F.from_json("inv_value", "array<string>")).alias("pos", "imop"),
            F.from_json("value", "array<string>").alias("cmops"),
        )
        .select(
            "process",
            "index",
            "type",
            "pos",
            F.from_json("imop", "array<string>").alias("im"),
            F.from_json(F.get("cmops", F.col("pos")), "array<string>").alias("cm"),
        )
        .where(F.get("im", 0) == "send")
        .select(
            "process",
            "index",
            "type",
            "pos",
            F.get("im", 1).cast("long").alias("key"),
            F.get("im", 2).cast("long").alias("value"),
            F.when(F.col("type") == "ok", F.get(F.from_json(F.get("cm", 2), "array<long>"), 0)).alias("offset"),
        )
        .cache()
    )
    polls = (
        comp.where((F.col("type") == "ok") & F.col("f").isin("poll", "txn"))
        .select("process", "index", "final", F.explode(F.from_json("value", "array<string>")).alias("mop"))
        .select("process", "index", "final", F.from_json("mop", "array<string>").alias("m"))
        .where(F.get("m", 0) == "poll")
        .select("process", "index", "final", F.explode(F.from_json(F.get("m", 1), POLL_MAP)).alias("k", "pairs"))
        .select(
            "process",
            "index",
            "final",
            F.col("k").cast("long").alias("key"),
            F.posexplode("pairs").alias("pos", "pair"),
        )
        .select(
            "process", "index", "final", "key", "pos", F.get("pair", 0).alias("offset"), F.get("pair", 1).alias("value")
        )
        .cache()
    )
    assigns = comp.where((F.col("f") == "assign") & (F.col("type") == "ok")).select("process", "index")
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
