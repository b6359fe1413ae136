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

The tables are SQL over a temporary view of the ops (`client_sql`), so building them is two
statements analysed by Spark, not dozens of DataFrame calls (for a small history, building the plan
cost more than running it). Tables (keys, offsets and values are longs; process is a string):
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
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
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


_EMPTY = "CAST(array() AS array<bigint>)"
#: every key a completion's rebalance log names (revoked, assigned, or Jepsen's `keys`)
REBALANCED = ("coalesce(array_distinct(flatten(transform(rebalance_log, e -> concat("
              + ", ".join(f"coalesce(e.{n}, {_EMPTY})" for n in ("revoked", "assigned", "keys"))
              + f")))), {_EMPTY})")
KEY_FS_SQL = ", ".join(f"'{f}'" for f in KEY_OPS)


def comp_sql(ops: str) -> str:
    """Client completions of the ops view `ops`, each joined to its invoke by a window over the
    process (a process runs one op at a time), with `n_assign`; and unfinished invokes as `info`."""
    return f"""
      WITH paired AS (
        SELECT *, lag(index) OVER w AS inv_index, lag(time) OVER w AS inv_time, lag(value) OVER w AS inv_value,
          lag(type) OVER w AS inv_type, lead(type) OVER w AS next_type,
          sum(CASE WHEN f IN ({KEY_FS_SQL}) AND type IN ('ok', 'info') THEN 1 ELSE 0 END) OVER (
            PARTITION BY run, process ORDER BY index ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n_assign
        FROM {ops} WHERE process <> 'nemesis'
        WINDOW w AS (PARTITION BY run, process ORDER BY index))
      SELECT run, index, inv_index, process, type, f, time, inv_time, time - inv_time AS latency, value,
        inv_value, coalesce(final, false) AS final, n_assign, `rebalance-log` AS rebalance_log, 'comp' AS part
      FROM paired WHERE type <> 'invoke' AND inv_type = 'invoke'
      UNION ALL
      SELECT run, index, NULL, process, 'info', f, time, NULL, NULL, CAST(NULL AS STRING), value,
        coalesce(final, false), n_assign, NULL, 'unfinished'
      FROM paired WHERE type = 'invoke' AND next_type IS NULL
    """


def mops_sql(comp: str) -> str:
    """One row per fact about a key (columns `MOP_COLUMNS`) from the completions view `comp`."""
    nulls = "CAST(NULL AS INT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), false, false, CAST(NULL AS BIGINT)"
    return f"""
      SELECT run, CAST(get(im, 1) AS BIGINT) AS key, 'send' AS kind, process, index, type, pos,
        CASE WHEN type = 'ok' THEN get(from_json(get(cm, 2), 'array<bigint>'), 0) END AS `offset`,
        CAST(get(im, 2) AS BIGINT) AS value, final, false AS rebalanced, n_assign
      FROM (
        SELECT *, from_json(imop, 'array<string>') AS im, from_json(get(cmops, pos), 'array<string>') AS cm
        FROM (
          SELECT *, from_json(value, 'array<string>') AS cmops
          FROM (SELECT *, posexplode(from_json(inv_value, 'array<string>')) AS (pos, imop)
                FROM {comp} WHERE f IN ('send', 'txn'))))
      WHERE get(im, 0) = 'send'
      UNION ALL
      SELECT run, key, 'poll', process, index, type, pos, get(pair, 0), get(pair, 1), final,
        array_contains(rb, key), n_assign
      FROM (
        SELECT *, CAST(k AS BIGINT) AS key, posexplode(pairs) AS (pos, pair)
        FROM (
          SELECT *, explode(from_json(get(m, 1), 'map<string,array<array<bigint>>>')) AS (k, pairs)
          FROM (
            SELECT *, from_json(mop, 'array<string>') AS m
            FROM (SELECT *, {REBALANCED} AS rb, explode(from_json(value, 'array<string>')) AS mop
                  FROM {comp} WHERE part = 'comp' AND type = 'ok' AND f IN ('poll', 'txn')))
          WHERE get(m, 0) = 'poll'))
      UNION ALL
      SELECT run, key, 'keep', process, index, type, {nulls}
      FROM (SELECT *, explode(from_json(value, 'array<bigint>')) AS key
            FROM {comp} WHERE part = 'comp' AND f IN ({KEY_FS_SQL}) AND type IN ('ok', 'info'))
      UNION ALL
      SELECT run, key, 'reset', process, index, type, {nulls}
      FROM (SELECT *, explode({REBALANCED}) AS key
            FROM {comp} WHERE part = 'comp' AND rebalance_log IS NOT NULL AND type IN ('ok', 'info'))
    """
