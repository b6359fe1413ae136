"""The history inside the JVM, where Spark reads the lines themselves (the cross-run analysis).

The checks do not parse history JSON in Spark: the strict reader's pass writes typed columns for
them (`kernel.history.columns`). What reads `history.jsonl` with Spark directly — `results.analyze`,
counting ops across a store — uses `OP_SCHEMA` (top-level fields; `value` kept as raw JSON text, since
a value mixes types no Spark schema holds), and `file_path` to tell the files of one read apart.
"""

from __future__ import annotations

from pyspark.sql import Column
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


def file_path(col: Column) -> Column:
    """A file's absolute path from Spark's `_metadata.file_path` (a `file:` URI, percent-encoded)."""
    return F.url_decode(F.regexp_replace(F.regexp_replace(col, "^file:/*", "/"), "\\+", "%2B"))
