"""The one table every checker reads: the facts of every history about every key, in key order.

`kernel.history.spark` parses the histories (one or many, each row tagged with its `run`) into
micro-op rows; here the replica dumps join them and the lot is partitioned once by (run, key), then
each row gets what several checkers need, computed once with windows over that partitioning (no
further shuffles, no joins):

- `idx`: the row's position in its key's *version order* (every offset anyone observed: acknowledged
  sends and polls, sorted, gaps removed); `vidx`: the index of the row's *value* (its last position,
  as Jepsen's `by-value` map), which also places an `info` send whose value was read; `at`: `idx`
  where the row has an offset, else `vidx` (the order checks use it: a duplicated value read in
  offset order is in order, although Jepsen, indexing reads by value, calls it non-monotonic);
- `polled` / `sent`: some poll read / some op sent this value of this key; `failed_at`: the op
  index of a failed send of it; `max_read_idx`: the highest index any poll of the key read.

The table is cached: the anomalies are then row sets of it, collected together (`results.check`).
Columns: run, key, kind (send, poll, keep, reset, replica), process (a replica's node), index, type,
pos, offset, value, final, rebalanced, n_assign, epoch (replicas), idx, vidx, at, polled, sent,
failed_at, max_read_idx.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kernel.history.spark import client_tables, file_path

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
#: bytes of history per partition of the keyed table: tiny inputs stay in one partition
BYTES_PER_PARTITION = 64 << 20


@dataclass
class Frames:
    ops: DataFrame
    comp: DataFrame
    facts: DataFrame
    has_replicas: bool

    def unpersist(self) -> None:
        for df in (self.comp, self.facts):
            df.unpersist()


def partitions_for(spark: Any, nbytes: int) -> int:
    most = max(1, int(spark.sparkContext.defaultParallelism) * 2)
    return max(1, min(most, nbytes // BYTES_PER_PARTITION + 1))


def load_frames(spark: Any, histories: Sequence[Path], replicas: Sequence[Path | None] = ()) -> Frames:
    """`histories[i]` is run i; `replicas[i]` its replica dump directory (or None)."""
    nbytes = sum(p.stat().st_size for p in histories)
    parts = partitions_for(spark, nbytes)
    spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    t = client_tables(spark, histories)
    comp = t.comp.cache()
    rows = t.mops.select("*", F.lit(None).cast("long").alias("epoch"))
    reps = load_replicas(spark, list(replicas))
    if reps is not None:
        rows = rows.unionByName(reps)
    rows = rows.repartition(parts, "run", "key")
    in_vo = F.col("kind").isin("send", "poll") & F.col("offset").isNotNull()
    by_key = Window.partitionBy("run", "key")
    order = by_key.orderBy(F.when(in_vo, 0).otherwise(1), "offset")
    by_value = Window.partitionBy("run", "key", "value")
    with_idx = rows.select("*", F.when(in_vo, F.dense_rank().over(order) - 1).alias("idx"))
    facts = with_idx.select(
        "*",
        F.max(F.when(F.col("kind").isin("send", "poll"), F.col("idx"))).over(by_value).alias("vidx"),
        F.max(F.col("kind") == "poll").over(by_value).alias("polled"),
        F.max(F.col("kind") == "send").over(by_value).alias("sent"),
        F.max(F.when((F.col("kind") == "send") & (F.col("type") == "fail"), F.col("index"))).over(by_value)
        .alias("failed_at"),
        F.max(F.when(F.col("kind") == "poll", F.col("idx"))).over(by_key).alias("max_read_idx"),
    ).select("*", F.coalesce("idx", "vidx").alias("at")).cache()
    return Frames(t.ops, comp, facts, reps is not None)


def load_replicas(spark: Any, dirs: list[Path | None]) -> DataFrame | None:
    """Committed records (offset < HW) of every `replicas/<node>/<topic>-<p>.jsonl`, as `replica` rows
    (process = the node) of the run whose directory it is."""
    files = [(run, f) for run, d in enumerate(dirs) if d is not None and d.is_dir()
             for f in sorted(d.glob("*/*.jsonl"))]
    if not files:
        return None
    where = F.create_map(*[x for run, f in files for x in (F.lit(str(f.resolve())), F.lit(run))])
    raw = spark.read.schema(REPLICA_SCHEMA).json([str(f.resolve()) for _, f in files]).select(
        "*", file_path(F.col("_metadata.file_path")).alias("file"))
    node = F.regexp_extract("file", r"/([^/]+)/[^/]+\.jsonl$", 1)
    key = F.regexp_extract("file", r"-(\d+)\.jsonl$", 1).cast("long")
    hw = F.max("hw").over(Window.partitionBy("file"))
    tagged = raw.select("*", hw.alias("file_hw"))
    return tagged.where(F.col("offset").isNotNull() & (F.col("offset") < F.col("file_hw"))).select(
        where[F.col("file")].alias("run"),
        key.alias("key"),
        F.lit("replica").alias("kind"),
        node.alias("process"),
        F.lit(None).cast("long").alias("index"),
        F.lit(None).cast("string").alias("type"),
        F.lit(None).cast("int").alias("pos"),
        "offset",
        F.col("value").cast("long").alias("value"),
        F.lit(False).alias("final"),
        F.lit(False).alias("rebalanced"),
        F.lit(None).cast("long").alias("n_assign"),
        "epoch",
    )

