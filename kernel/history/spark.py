"""The history inside the JVM: the same layout as `op.py`, as Spark tables with declared schemas.

The checks run on Spark for scale, so they cannot call the Python reader per op (no UDFs on the hot
path). This module is the reader's other half: the only place that knows, in Spark terms, where a
send's key, value and offset sit. It must agree with `schema.py`; the checks run `scan()` first, so
every line Spark parses here has already passed the strict Python schema, and a parse that still
yields nulls is a bug, not bad input.

Many histories are read as one table: every row carries `run`, the position of its history in the
list it was read from, so one Spark job can judge a whole store and pay its fixed costs once.

A `value` mixes types (`["send", k, [offset, v]]`, `["poll", {"k": [[o, v], ...]}]`), which no
Spark schema can hold, so it is parsed in steps: the op with `value` as raw JSON text, then each
micro-op as an array of raw JSON strings, then each part with its own type.

Tables (keys, offsets and values are longs; process is a string):
- `ops`: every line; `comp`: client completions joined to their invokes (latency, both values), with
  `n_assign`, how many assign/subscribe ops the process had completed (ok or info) up to this one;
- `mops`: one row per fact about a key, `kind` saying which: `send` (a send micro-op: op type, value,
  offset when ok, pos in its op), `poll` (a record read: offset, value, pos in its key's list,
  `rebalanced` when the poll's rebalance log names the key), `keep` (an assign or subscribe op that
  names the key), `reset` (a rebalance during a poll that revoked or assigned the key: an event of
  the op's `rebalance-log`, `{"revoked": [keys], "assigned": [keys]}`, or Jepsen's `{"keys": [...]}`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

REBALANCE = T.ArrayType(
    T.StructType(
        [T.StructField(name, T.ArrayType(T.LongType())) for name in ("revoked", "assigned", "keys")]
    )
)
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
        T.StructField("rebalance-log", REBALANCE),
    ]
)
POLL_MAP = "map<string,array<array<long>>>"
KEY_OPS = ("assign", "subscribe")
#: the columns of `mops`, in order (every kind fills the ones it knows, the rest are null)
MOP_COLUMNS = ("run", "key", "kind", "process", "index", "type", "pos", "offset", "value", "final", "rebalanced",
               "n_assign")


@dataclass
class ClientTables:
    ops: DataFrame
    comp: DataFrame
    mops: DataFrame


def file_path(col: Column) -> Column:
    """A file's absolute path from Spark's `_metadata.file_path` (a `file:` URI, percent-encoded)."""
    return F.url_decode(F.regexp_replace(F.regexp_replace(col, "^file:/*", "/"), "\\+", "%2B"))


def run_of(paths: Sequence[Path], col: Column) -> Column:
    """The run number (position in `paths`) of the file `col` names."""
    pairs = [x for i, p in enumerate(paths) for x in (F.lit(str(p.resolve())), F.lit(i))]
    return F.create_map(*pairs)[file_path(col)]


def load_ops(spark: Any, histories: Sequence[Path]) -> DataFrame:
    """Every op of every history, with `run` (its history's position in `histories`)."""
    lines = spark.read.text([str(p.resolve()) for p in histories]).where(F.length(F.trim("value")) > 0)
    return (
        lines.select(run_of(histories, F.col("_metadata.file_path")).alias("run"),
                     F.from_json("value", OP_SCHEMA).alias("j"))
        .select("run", "j.*")
        .where(F.col("index").isNotNull())
    )


def _null(kind: str) -> Column:
    return F.lit(None).cast(kind)


def client_tables(spark: Any, histories: Sequence[Path]) -> ClientTables:
    ops = load_ops(spark, histories)
    client = ops.where(F.col("process") != "nemesis")
    w = Window.partitionBy("run", "process").orderBy("index")
    key_done = F.col("f").isin(*KEY_OPS) & F.col("type").isin("ok", "info")
    paired = client.select(
        "*",
        F.lag("index").over(w).alias("inv_index"),
        F.lag("time").over(w).alias("inv_time"),
        F.lag("value").over(w).alias("inv_value"),
        F.lag("type").over(w).alias("inv_type"),
        F.lead("type").over(w).alias("next_type"),
        F.sum(key_done.cast("int")).over(w.rowsBetween(Window.unboundedPreceding, 0)).alias("n_assign"),
    )
    comp = (
        paired.where((F.col("type") != "invoke") & (F.col("inv_type") == "invoke"))
        .select(
            "run",
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
            "n_assign",
            F.col("rebalance-log").alias("rebalance_log"),
        )
    )
    # unfinished invokes (a crashed run) count as info: their sends may have happened
    unfinished = paired.where((F.col("type") == "invoke") & F.col("next_type").isNull()).select(
        "run",
        "index",
        "process",
        F.lit("info").alias("type"),
        "f",
        F.col("value").alias("inv_value"),
        _null("string").alias("value"),
        F.coalesce("final", F.lit(False)).alias("final"),
        "n_assign",
    )
    return ClientTables(ops, comp, _mops(comp, unfinished))


def _mops(comp: DataFrame, unfinished: DataFrame) -> DataFrame:
    send_src = comp.select(*unfinished.columns).unionByName(unfinished).where(F.col("f").isin("send", "txn"))
    sends = (
        send_src.select(
            "*",
            F.posexplode(F.from_json("inv_value", "array<string>")).alias("pos", "imop"),
            F.from_json("value", "array<string>").alias("cmops"),
        )
        .select("*", F.from_json("imop", "array<string>").alias("im"),
                F.from_json(F.get("cmops", F.col("pos")), "array<string>").alias("cm"))
        .where(F.get("im", 0) == "send")
        .select(
            "run",
            F.get("im", 1).cast("long").alias("key"),
            F.lit("send").alias("kind"),
            "process",
            "index",
            "type",
            "pos",
            F.when(F.col("type") == "ok", F.get(F.from_json(F.get("cm", 2), "array<long>"), 0)).alias("offset"),
            F.get("im", 2).cast("long").alias("value"),
            "final",
            F.lit(False).alias("rebalanced"),
            "n_assign",
        )
    )
    rebalanced = F.array_distinct(F.flatten(F.transform(
        F.coalesce("rebalance_log", F.array()),
        lambda e: F.concat(*(F.coalesce(e[name], F.array().cast("array<long>"))
                             for name in ("revoked", "assigned", "keys"))))))
    polls = (
        comp.where((F.col("type") == "ok") & F.col("f").isin("poll", "txn"))
        .select("*", rebalanced.alias("rb"), F.explode(F.from_json("value", "array<string>")).alias("mop"))
        .select("*", F.from_json("mop", "array<string>").alias("m"))
        .where(F.get("m", 0) == "poll")
        .select("*", F.explode(F.from_json(F.get("m", 1), POLL_MAP)).alias("k", "pairs"))
        .select("*", F.col("k").cast("long").alias("key"), F.posexplode("pairs").alias("pos", "pair"))
        .select(
            "run",
            "key",
            F.lit("poll").alias("kind"),
            "process",
            "index",
            "type",
            "pos",
            F.get("pair", 0).alias("offset"),
            F.get("pair", 1).alias("value"),
            "final",
            F.array_contains("rb", F.col("key")).alias("rebalanced"),
            "n_assign",
        )
    )
    keeps = comp.where(F.col("f").isin(*KEY_OPS) & F.col("type").isin("ok", "info")).select(
        "run", F.explode(F.from_json("value", "array<long>")).alias("key"), F.lit("keep").alias("kind"),
        "process", "index", "type")
    resets = comp.where(F.col("rebalance_log").isNotNull() & F.col("type").isin("ok", "info")).select(
        "run", F.explode(rebalanced).alias("key"), F.lit("reset").alias("kind"), "process", "index", "type")
    out = sends.unionByName(polls)
    for part in (keeps, resets):
        out = out.unionByName(part.select(
            *part.columns, _null("int").alias("pos"), _null("long").alias("offset"), _null("long").alias("value"),
            F.lit(False).alias("final"), F.lit(False).alias("rebalanced"), _null("long").alias("n_assign")))
    return out.select(*MOP_COLUMNS)
