"""The history inside the JVM: the same layout as `op.py`, as Spark tables with declared schemas.

The checks run on Spark for scale, so they cannot call the Python reader per op (no UDFs on the hot
path). This module is the reader's other half: the only place that knows, in Spark terms, where a
send's key, value and offset sit. It must agree with `schema.py`; the checks run `scan()` first, so
every line Spark parses here has already passed the strict Python schema, and a parse that still
yields nulls is a bug, not bad input.

A `value` mixes types (`["send", k, [offset, v]]`, `["poll", {"k": [[o, v], ...]}]`), which no
Spark schema can hold, so it is parsed in steps: the op with `value` as raw JSON text, then each
micro-op as an array of raw JSON strings, then each part with its own type.

Tables (keys, offsets and values are longs; process is a string):
- `ops`: every line; `comp`: client completions joined to their invokes (latency, both values);
- `sends`: one row per send micro-op: process, op index, type, key, value, offset (ok only), pos;
- `polls`: one row per record read: process, op index, final, key, offset, value, pos in its list;
- `assigns`: ok assign/subscribe ops (process, index, keys).
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
        T.StructField("fault", T.StringType()),
    ]
)
POLL_MAP = "map<string,array<array<long>>>"


@dataclass
class ClientTables:
    ops: DataFrame
    comp: DataFrame
    sends: DataFrame
    polls: DataFrame
    assigns: DataFrame


def load_ops(spark: Any, history: Path) -> DataFrame:
    lines = spark.read.text(str(history)).where(F.length(F.trim("value")) > 0)
    return lines.select(F.from_json("value", OP_SCHEMA).alias("j")).select("j.*").where(F.col("index").isNotNull())


def client_tables(spark: Any, history: Path) -> ClientTables:
    ops = load_ops(spark, history)
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
    assigns = comp.where(F.col("f").isin("assign", "subscribe") & (F.col("type") == "ok")).select(
        "process", "index", F.from_json("value", "array<long>").alias("keys")
    )
    return ClientTables(ops, comp, sends, polls, assigns)
