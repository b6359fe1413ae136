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


def load_ops(spark: Any, histories: Sequence[Path], *, single: bool = False) -> DataFrame:
    """Every op of every history, with `run` (its history's position in `histories`). `single`: read
    into one partition, which Spark then knows satisfies every grouping (run, process, key...), so
    a small history is judged without a single shuffle."""
    lines = spark.read.text([str(p.resolve()) for p in histories]).where(F.length(F.trim("value")) > 0)
    if single:
        lines = lines.coalesce(1)
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
    process (a process runs one op at a time), with `n_assign`; and unfinished invokes as `info`
    (`part` 'unfinished', their value in `inv_value`). One pass over the ops: a UNION of the two
    kinds would read and parse the history twice."""
    return f"""
      WITH paired AS (
        SELECT *, type <> 'invoke' AS done,
          lag(index) OVER w AS inv_index, lag(time) OVER w AS inv_time, lag(value) OVER w AS inv_value,
          lag(type) OVER w AS inv_type, lead(type) OVER w AS next_type,
          sum(CASE WHEN f IN ({KEY_FS_SQL}) AND type IN ('ok', 'info') THEN 1 ELSE 0 END) OVER (
            PARTITION BY run, process ORDER BY index ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n_assign
        FROM {ops} WHERE process <> 'nemesis'
        WINDOW w AS (PARTITION BY run, process ORDER BY index))
      SELECT run, index, CASE WHEN done THEN inv_index END AS inv_index, process,
        CASE WHEN done THEN type ELSE 'info' END AS type, f, time, CASE WHEN done THEN inv_time END AS inv_time,
        CASE WHEN done THEN time - inv_time END AS latency, CASE WHEN done THEN value END AS value,
        CASE WHEN done THEN inv_value ELSE value END AS inv_value, coalesce(final, false) AS final, n_assign,
        CASE WHEN done THEN `rebalance-log` END AS rebalance_log,
        CASE WHEN done THEN 'comp' ELSE 'unfinished' END AS part
      FROM paired WHERE (done AND inv_type = 'invoke') OR (NOT done AND next_type IS NULL)
    """


#: one fact of a completion, before it becomes a row of `mops`
FACT = "struct<key:bigint,kind:string,pos:int,offset:bigint,value:bigint,rebalanced:boolean>"
_NO_FACTS = f"CAST(array() AS array<{FACT}>)"


def _fact(key: str, kind: str, pos: str = "CAST(NULL AS INT)", offset: str = "CAST(NULL AS BIGINT)",
          value: str = "CAST(NULL AS BIGINT)", rebalanced: str = "false") -> str:
    return (f"named_struct('key', CAST({key} AS BIGINT), 'kind', '{kind}', 'pos', {pos}, 'offset', {offset}, "
            f"'value', {value}, 'rebalanced', {rebalanced})")


def mops_sql(comp: str) -> str:
    """One row per fact about a key (columns `MOP_COLUMNS`) from the completions view `comp`.

    Every completion yields the array of its facts (sends, polled records, keys an assign keeps,
    keys a rebalance names), exploded once: one pass over `comp`, where a UNION of one query per
    kind would read and parse the history once per kind."""
    poll_map = "'map<string,array<array<bigint>>>'"
    sends = f"""CASE WHEN f IN ('send', 'txn') THEN filter(transform(ims, (im, pos) ->
          CASE WHEN get(im, 0) = 'send' THEN {_fact("get(im, 1)", "send", "pos",
            "CASE WHEN type = 'ok' THEN get(from_json(get(get(cms, pos), 2), 'array<bigint>'), 0) END",
            "CAST(get(im, 2) AS BIGINT)")} END), x -> x IS NOT NULL) END"""
    polls = f"""CASE WHEN part = 'comp' AND type = 'ok' AND f IN ('poll', 'txn') THEN flatten(transform(
          filter(cms, m -> get(m, 0) = 'poll'), m -> coalesce(flatten(transform(
            map_entries(from_json(get(m, 1), {poll_map})), e -> coalesce(transform(e.value, (pair, pos) ->
              {_fact("e.key", "poll", "pos", "get(pair, 0)", "get(pair, 1)",
                     "array_contains(rb, CAST(e.key AS BIGINT))")}), {_NO_FACTS}))), {_NO_FACTS}))) END"""
    keeps = f"""CASE WHEN part = 'comp' AND f IN ({KEY_FS_SQL}) AND type IN ('ok', 'info')
          THEN transform(from_json(value, 'array<bigint>'), k -> {_fact("k", "keep")}) END"""
    resets = f"""CASE WHEN part = 'comp' AND rebalance_log IS NOT NULL AND type IN ('ok', 'info')
          THEN transform(rb, k -> {_fact("k", "reset")}) END"""
    facts = ", ".join(f"coalesce({x}, {_NO_FACTS})" for x in (sends, polls, keeps, resets))
    return f"""
      SELECT run, m.key, m.kind, process, index, type, m.pos, m.offset AS `offset`, m.value,
        CASE WHEN m.kind IN ('send', 'poll') THEN final ELSE false END AS final, m.rebalanced,
        CASE WHEN m.kind IN ('send', 'poll') THEN n_assign END AS n_assign
      FROM (
        SELECT run, process, index, type, final, n_assign, explode(concat({facts})) AS m
        FROM (
          SELECT *, {REBALANCED} AS rb,
            transform(from_json(inv_value, 'array<string>'), x -> from_json(x, 'array<string>')) AS ims,
            transform(from_json(value, 'array<string>'), x -> from_json(x, 'array<string>')) AS cms
          FROM {comp}))
    """
