"""The history inside the JVM, where Spark reads the lines themselves (the cross-run analysis).

The checks do not parse history JSON in Spark: the strict reader's pass writes typed columns for
them (`kernel.history.columns`). What reads `history.jsonl` with Spark directly — `results.analyze`,
counting ops across a store — uses `OP_SCHEMA` (the top-level fields it counts by; never `value`, which
mixes types no Spark schema holds), and `file_path` to tell the files of one read apart.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

#: the fields `results.analyze` counts by; JSON parsing in the JVM skips what a schema leaves out
OP_SCHEMA = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("time", T.LongType()),
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("final", T.BooleanType()),
    ]
)


def file_path(col: Column) -> Column:
    """A file's absolute path from Spark's `_metadata.file_path` (a `file:` URI, percent-encoded)."""
    return F.url_decode(F.regexp_replace(F.regexp_replace(col, "^file:/*", "/"), "\\+", "%2B"))
