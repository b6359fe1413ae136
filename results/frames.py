"""The one table every checker reads: the facts of every history about every key, in key order.

The strict reader's pass wrote each history's facts as typed columns (`kernel.history.columns`,
one Parquet file per history, each row tagged with its `run`); here they are partitioned once by
(run, key), then each row gets what several checkers need, computed
once with windows over that partitioning (no further shuffles, no joins):

- `committed`: a send row's op must have committed (Jepsen's `must-have-committed?`): it completed
  ok, or info and some value it sent (to any key) was read by an ok poll — `proven`, found by one
  small broadcast join before the table is built (`_proven`);
- `in_vo`: the row's offset is in its key's *version order*: every offset a poll of any outcome
  returned (Jepsen trusts even aborted polls: a consumer never returns what is not in the log) and
  every offset a committed send learned (a failed send's offset never counts);
- `idx`: the row's position in that order (offsets sorted, gaps removed); `vidx`: the index of the
  row's *value* (its last position, as Jepsen's `by-value` map), which also places a send whose
  offset is unknown or untrusted once its value was read; `at`: `idx` where the row has one, else
  `vidx` (the order checks use it: a duplicated value read in offset order is in order, although
  Jepsen, indexing reads by value, calls it non-monotonic);
- `polled`: an ok poll read this value of this key (Jepsen's `reads-by-type :ok`, what lost-write and
  unseen look at); `sent`: some op sent it; `failed_at`: the op index of a failed send of it;
  `writer` / `first_writer`: the last / first op that sent it (Jepsen's `writer-of` keeps the last),
  what the dependency edges and `precommitted-read` use; `ok_writer`: the last ok op that sent it;
  `max_read_idx`: the highest index an ok poll of the key read.

The table is cached: the anomalies are then row sets of it, collected together (`results.check`).
Columns: run, key, kind (send, poll, keep, reset), process, index, type,
pos, offset, value, final, rebalanced, n_assign, invoke, proven, committed, in_vo, idx, vidx,
at, polled, sent, failed_at, writer, ok_writer, first_writer, max_read_idx (and `invoke`, a poll
record's op's invoke index).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from kernel.history.columns import FACTS, ColumnFiles
from results.replica_columns import REPLICA_FACTS

#: bytes of input (histories and replica dumps) per partition of the keyed table, at most two
#: partitions per core: tiny inputs stay in one partition. Each window of the checks sorts a whole
#: partition; a batch of 32 sim-search runs in 2 partitions spilled over and over, and merging the
#: spill files (each with a buffer outside Spark's managed memory) ran the 1.4 GB driver out of heap
#: (docs/measurements/check.md, "2026-11-25: after the batch-memory fixes"). sim-search now judges
#: at most 128 MB at once (4 partitions).
BYTES_PER_PARTITION = 32 << 20
#: below this many bytes of history, Spark evaluates expressions without generating code: compiling
#: a check's generated classes (Janino, then the JIT on them) costs seconds — more than interpreting
#: a small input, and most of a fresh process's first check
CODEGEN_MIN_BYTES = 32 << 20
#: ... or this many rows of facts: a transactional history packs several polled records into a line,
#: and there, even on a warm session, compiled code was much faster than interpreted on a history of
#: 10^4 lines; at 10^4 queue ops (~10^4 rows) interpreting still wins (docs/measurements/check.md,
#: "Figures first recorded in code comments")
CODEGEN_MIN_ROWS = 30_000
#: up to this many rows of facts the checkpoint is kept in the heap as rows (`HEAP`), above it on disk.
#: Every check scans the table, and reading it back from disk was a sizeable part of a warm check of
#: a `make run` (docs/measurements/check.md, "Figures first recorded in code comments"); a large
#: batch keeps it on disk, since the checks' sorts need the heap (see `load_frames`)
HEAP_ROWS = 500_000
#: in memory, not serialized; a block memory cannot hold goes to disk
HEAP = StorageLevel(True, True, False, True, 1)
#: True once this process's check warm-up (`results/warm.py`) ran its tiny check with generated code:
#: the JVM then holds every checker's compiled classes (Spark caches them by their source, which does
#: not depend on the history), so compiling is already paid and generated code wins at any size
#: (docs/measurements/check.md, "2026-11-28: on a quiet machine")
_classes_cached = False


def classes_cached(on: bool) -> None:
    """Say whether the checks' generated classes are compiled in this JVM (the warm-up's business)."""
    global _classes_cached
    _classes_cached = on


def classes_are_cached() -> bool:
    """Whether they are (a warm shared check server's session says so as it connects)."""
    return _classes_cached


@dataclass
class Frames:
    """The batch's keyed table (`facts`: the history's rows, windows computed) and its replica dumps'
    committed records (`replicas`: run, key, kind, process = the node, offset, value, epoch), both
    partitioned by (run, key)."""

    facts: DataFrame
    replicas: DataFrame
    views: tuple[str, ...] = ()

    def unpersist(self) -> None:
        """Drop the views and the checkpoint's blocks. `DataFrame.unpersist` leaves a local
        checkpoint's blocks in place until the JVM's garbage collector notices, so a process that
        checks batch after batch (sim-search, a nightly) would carry every earlier batch's table."""
        from results.spark import is_remote

        spark = self.facts.sparkSession
        self.facts.unpersist()
        if not is_remote(spark):  # a Connect session's checkpoint goes with the session (`results.server`)
            for rdd in list(spark.sparkContext._jsc.getPersistentRDDs().values()):
                rdd.unpersist(False)
        for v in self.views:
            spark.catalog.dropTempView(v)


_views = itertools.count()


def partitions_for(spark: Any, nbytes: int) -> int:
    from results.spark import is_remote

    # the shared check server (`results.server`) is a local[*] driver on this machine
    cores = (os.cpu_count() or 1) if is_remote(spark) else int(spark.sparkContext.defaultParallelism)
    most = max(1, cores * 2)
    return max(1, min(most, nbytes // BYTES_PER_PARTITION + 1))


def set_codegen(spark: Any, on: bool) -> None:
    """Whole-stage code generation and compiled expressions, or interpreted evaluation."""
    spark.conf.set("spark.sql.codegen.wholeStage", "true" if on else "false")
    spark.conf.set("spark.sql.codegen.factoryMode", "FALLBACK" if on else "NO_CODEGEN")


def _spark_schema(schema: Any) -> T.StructType:
    """The Spark twin of an Arrow schema (declared, so no job reads the files to infer it)."""
    kinds = {"int32": T.IntegerType(), "int64": T.LongType(), "string": T.StringType(), "bool": T.BooleanType()}
    return T.StructType([T.StructField(f.name, kinds[str(f.type)]) for f in schema])


def load_frames(spark: Any, columns: Sequence[ColumnFiles], replicas: Sequence[Path] = (),
                nbytes: int | None = None) -> Frames:
    """`columns` hold the runs' facts (each row tagged with its run number); `replicas` the runs'
    replica dumps' committed records (`results.replica_columns`, each row tagged too); `nbytes` the
    size of the histories (how many partitions the job needs). The keyed table is materialised at
    once as a local checkpoint: its plan is then a leaf, so the anomaly statement over it is analysed
    in a fraction of the time a deep cached plan costs. The checkpoint of a large table is kept on
    local disk, not in the heap: the checks' sorts need the heap, and the table is read back from the
    page cache; a small one (`HEAP_ROWS`) stays in the heap, where reading it costs nothing."""
    files = [str(c.facts.resolve()) for c in columns]
    if nbytes is None:
        nbytes = sum(Path(f).stat().st_size for f in files)
    parts = partitions_for(spark, nbytes + sum(f.stat().st_size for f in replicas))
    spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    on_disk = sum(Path(f).stat().st_size for f in files)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(max(1 << 20, on_disk // max(1, parts) + 1)))
    set_codegen(spark, _classes_cached or nbytes >= CODEGEN_MIN_BYTES
                or sum(c.rows for c in columns) >= CODEGEN_MIN_ROWS)
    n = next(_views)
    mops_v, rep_v, proven_v = f"chaos_mops_{n}", f"chaos_replicas_{n}", f"chaos_proven_{n}"
    spark.read.schema(_spark_schema(FACTS)).parquet(*files).createOrReplaceTempView(mops_v)
    proven = _proven(spark, mops_v, proven_v) if any(c.info_sends for c in columns) else None
    # the replica rows need none of the windows below (no version order, no writer): a table of their
    # own, read by the two checks that compare logs, keeps a third of `make run`'s rows out of the
    # table every other check scans
    spread = "COALESCE(1)" if parts == 1 else f"REPARTITION({parts}, run, key)"
    if replicas:
        spark.read.schema(_spark_schema(REPLICA_FACTS)).parquet(
            *[str(f.resolve()) for f in replicas]).createOrReplaceTempView(rep_v)
    else:
        spark.createDataFrame([], _spark_schema(REPLICA_FACTS)).createOrReplaceTempView(rep_v)
    reps = spark.sql(f"SELECT /*+ {spread} */ run, key, kind, process, `offset`, value, epoch FROM {rep_v} "
                     "WHERE `offset` IS NOT NULL")
    if proven is None:
        rows = f"SELECT *, false AS proven FROM {mops_v}"
    else:
        rows = (f"SELECT /*+ BROADCAST(p) */ m.*, p.index IS NOT NULL AS proven "
                f"FROM {mops_v} m LEFT JOIN {proven_v} p ON m.run = p.run AND m.index = p.index")
    # one partition satisfies every grouping that follows: no shuffle at all, here or in the checks
    committed = "kind = 'send' AND (type = 'ok' OR (type = 'info' AND proven))"
    in_vo = f"`offset` IS NOT NULL AND (kind = 'poll' OR ({committed}))"
    facts = spark.sql(f"""
      SELECT *, coalesce(idx, vidx) AS at FROM (
        SELECT *,
          max(CASE WHEN kind IN ('send', 'poll') THEN idx END) OVER v AS vidx,
          coalesce(max(kind = 'poll' AND type = 'ok') OVER v, false) AS polled,
          max(kind = 'send') OVER v AS sent,
          max(CASE WHEN kind = 'send' AND type = 'fail' THEN index END) OVER v AS failed_at,
          max(CASE WHEN kind = 'send' THEN index END) OVER v AS writer,
          max(CASE WHEN kind = 'send' AND type = 'ok' THEN index END) OVER v AS ok_writer,
          min(CASE WHEN kind = 'send' THEN index END) OVER v AS first_writer,
          max(CASE WHEN kind = 'poll' AND type = 'ok' THEN idx END) OVER (PARTITION BY run, key) AS max_read_idx
        FROM (
          SELECT *, CASE WHEN in_vo THEN dense_rank() OVER (
              PARTITION BY run, key ORDER BY CASE WHEN in_vo THEN 0 ELSE 1 END, `offset`) - 1 END AS idx
          FROM (SELECT *, coalesce({committed}, false) AS committed, coalesce({in_vo}, false) AS in_vo
                FROM (SELECT /*+ {spread} */ * FROM ({rows}))))
        WINDOW v AS (PARTITION BY run, key, value))""")
    in_heap = sum(c.rows for c in columns) <= HEAP_ROWS
    facts = facts.localCheckpoint(eager=True, storageLevel=HEAP if in_heap else StorageLevel.DISK_ONLY)
    return Frames(facts, reps, (mops_v, rep_v, proven_v))


def _proven(spark: Any, mops: str, view: str) -> DataFrame | None:
    """The (run, index) of every info op that must have committed (Jepsen's `must-have-committed?`):
    an ok poll read a value it sent, to any key. A fact about the op across its keys, so it cannot
    be a window over one key's rows: a join of the few info sends with the ok polls' records,
    broadcasting the small side, collected (a handful of rows) and broadcast back into the table."""
    got = spark.sql(f"""
      SELECT /*+ BROADCAST(s) */ DISTINCT s.run, s.index
      FROM (SELECT run, key, value, index FROM {mops} WHERE kind = 'send' AND type = 'info') s
      JOIN (SELECT run, key, value FROM {mops} WHERE kind = 'poll' AND type = 'ok') p
        ON s.run = p.run AND s.key = p.key AND s.value = p.value""").collect()
    schema = T.StructType([T.StructField("run", T.IntegerType()), T.StructField("index", T.LongType())])
    df = spark.createDataFrame([(int(r["run"]), int(r["index"])) for r in got], schema)
    df.createOrReplaceTempView(view)
    return df
