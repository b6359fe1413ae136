"""The anomaly checkers: each a function Frames -> DataFrame with one row per anomaly.

Definitions follow Jepsen's Kafka checker (jepsen-io/jepsen, `jepsen/src/jepsen/tests/kafka.clj`),
restated here so a reader does not need Clojure. "Index" means a position in the key's *version
order*: every offset of the key that anyone observed (acknowledged sends and polls), sorted; a gap
in indices is a record someone knows exists. Rows carry the op indices, processes, offsets and
values a person needs to find the anomaly in the history.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from results.frames import Frames


def _with_idx(df: DataFrame, vo: DataFrame) -> DataFrame:
    return df.join(vo, ["key", "offset"], "left")


def inconsistent_offsets(fr: Frames) -> DataFrame:
    """Two different values at one key and offset, seen by any reads, acknowledged sends, or any
    replica's committed log (Jepsen: `:inconsistent-offsets`)."""
    src = (
        fr.sends.where(F.col("offset").isNotNull())
        .select("key", "offset", "value", F.concat(F.lit("send@"), F.col("index")).alias("seen_by"))
        .unionByName(
            fr.polls.select("key", "offset", "value", F.concat(F.lit("poll@"), F.col("index")).alias("seen_by"))
        )
    )
    if fr.replicas is not None:
        src = src.unionByName(
            fr.replicas.select("key", "offset", "value", F.concat(F.lit("replica:"), "node").alias("seen_by"))
        )
    return (
        src.groupBy("key", "offset")
        .agg(
            F.array_sort(F.collect_set("value")).alias("values"),
            F.slice(F.array_sort(F.collect_set("seen_by")), 1, 6).alias("seen_by"),
        )
        .where(F.size("values") > 1)
    )


def duplicate(fr: Frames) -> DataFrame:
    """One value at more than one offset of a key (Jepsen: `:duplicate`), from sends and reads."""
    src = (
        fr.sends.where(F.col("offset").isNotNull())
        .select("key", "offset", "value")
        .unionByName(fr.polls.select("key", "offset", "value"))
    )
    return (
        src.groupBy("key", "value")
        .agg(F.array_sort(F.collect_set("offset")).alias("offsets"))
        .where(F.size("offsets") > 1)
    )


def unexpected(fr: Frames) -> DataFrame:
    """A value read that no one ever tried to send (Jepsen: `:unexpected`)."""
    sent = fr.sends.select("key", "value").distinct()
    return fr.polls.join(sent, ["key", "value"], "left_anti").select("key", "offset", "value", "process", "index")


def g1a(fr: Frames) -> DataFrame:
    """Aborted read: a value read whose send definitely failed (Jepsen: `:G1a`)."""
    failed = fr.sends.where(F.col("type") == "fail").select("key", "value", F.col("index").alias("send_index"))
    return fr.polls.join(failed, ["key", "value"]).select("key", "offset", "value", "process", "index", "send_index")


def _acked(fr: Frames) -> DataFrame:
    return _with_idx(fr.sends.where((F.col("type") == "ok") & F.col("offset").isNotNull()), fr.version_order)


def _never_polled(fr: Frames, acked: DataFrame) -> DataFrame:
    return acked.join(fr.polls.select("key", "value").distinct(), ["key", "value"], "left_anti")


def _max_read_idx(fr: Frames) -> DataFrame:
    return _with_idx(fr.polls, fr.version_order).groupBy("key").agg(F.max("idx").alias("max_read_idx"))


def lost_write(fr: Frames) -> DataFrame:
    """An acknowledged send at index i that no poll ever returned, although some poll of the same key
    returned an index above i (Jepsen: `:lost-write`). A send that ended `info` has no known offset, so
    it can only enter the version order by being read — and then it is not lost."""
    return (
        _never_polled(fr, _acked(fr))
        .join(_max_read_idx(fr), "key")
        .where(F.col("idx") < F.col("max_read_idx"))
        .select("key", "offset", "value", "process", "index", "idx", "max_read_idx")
    )


def unseen(fr: Frames) -> DataFrame:
    """Acknowledged but never polled by anyone, not even the final drain, and above every read index of
    its key (so not already a lost write); Jepsen's `:unseen`, listed per key."""
    return (
        _never_polled(fr, _acked(fr))
        .join(_max_read_idx(fr), "key", "left")
        .where(F.col("max_read_idx").isNull() | (F.col("idx") >= F.col("max_read_idx")))
        .select("key", "offset", "value", "process", "index")
    )


def _poll_spans(fr: Frames) -> DataFrame:
    """Per (process, key, poll op): first and last index read, and which assign-epoch it is in."""
    p = _with_idx(fr.polls, fr.version_order)
    w = Window.partitionBy("process", "index", "key").orderBy("pos")
    spans = (
        p.select(
            "*",
            F.row_number().over(w).alias("rn"),
            F.count("*").over(Window.partitionBy("process", "index", "key")).alias("n"),
        )
        .groupBy("process", "index", "key")
        .agg(
            F.min(F.when(F.col("rn") == 1, F.col("idx"))).alias("first_idx"),
            F.min(F.when(F.col("rn") == F.col("n"), F.col("idx"))).alias("last_idx"),
            F.min(F.when(F.col("rn") == 1, F.col("offset"))).alias("first_offset"),
            F.min(F.when(F.col("rn") == F.col("n"), F.col("offset"))).alias("last_offset"),
        )
    )
    # an assign resets a consumer's position: number the assigns of each process and tag each poll
    events = (
        spans.select("process", "index", F.lit(0).alias("is_assign"))
        .distinct()
        .unionByName(fr.assigns.select("process", "index", F.lit(1).alias("is_assign")))
    )
    epoch = events.select(
        "process",
        "index",
        "is_assign",
        F.sum("is_assign").over(Window.partitionBy("process").orderBy("index")).alias("epoch"),
    )
    spans = spans.join(epoch.where(F.col("is_assign") == 0).select("process", "index", "epoch"), ["process", "index"])
    wk = Window.partitionBy("process", "key", "epoch").orderBy("index")
    return spans.select(
        "*",
        F.lag("last_idx").over(wk).alias("prev_last_idx"),
        F.lag("last_offset").over(wk).alias("prev_last_offset"),
        F.lag("index").over(wk).alias("prev_index"),
    )


def poll_skip(fr: Frames) -> DataFrame:
    """A consumer's next poll of a key starts past the index right after its previous poll's last one,
    skipping records it knows exist; reset by assign (Jepsen: `:poll-skip`)."""
    s = _poll_spans(fr)
    return s.where(F.col("first_idx") > F.col("prev_last_idx") + 1).select(
        "process",
        "key",
        "prev_index",
        "index",
        "prev_last_offset",
        "first_offset",
        (F.col("first_idx") - F.col("prev_last_idx") - 1).alias("skipped"),
    )


def nonmonotonic_poll(fr: Frames) -> DataFrame:
    """A consumer's next poll of a key starts at or before its previous poll's last index, without an
    assign in between (Jepsen: `:nonmonotonic-poll`)."""
    s = _poll_spans(fr)
    return s.where(F.col("first_idx") <= F.col("prev_last_idx")).select(
        "process", "key", "prev_index", "index", "prev_last_offset", "first_offset"
    )


def _internal(df: DataFrame, part: list[str]) -> DataFrame:
    w = Window.partitionBy(*part).orderBy("pos")
    return df.select("*", F.lag("idx").over(w).alias("prev_idx"), F.lag("offset").over(w).alias("prev_offset"))


def int_poll_skip(fr: Frames) -> DataFrame:
    """Within one poll of a key, consecutive records jump over a known index (Jepsen: `:int-poll-skip`)."""
    d = _internal(_with_idx(fr.polls, fr.version_order), ["process", "index", "key"])
    return d.where(F.col("idx") > F.col("prev_idx") + 1).select("process", "index", "key", "prev_offset", "offset")


def int_nonmonotonic_poll(fr: Frames) -> DataFrame:
    """Within one poll of a key, a record at or before the previous one (Jepsen: `:int-nonmonotonic-poll`)."""
    d = _internal(_with_idx(fr.polls, fr.version_order), ["process", "index", "key"])
    return d.where(F.col("idx") <= F.col("prev_idx")).select("process", "index", "key", "prev_offset", "offset")


def nonmonotonic_send(fr: Frames) -> DataFrame:
    """One producer's successive acknowledged send ops to a key get offsets that do not increase: the
    next op's first index is at or below the previous op's last (Jepsen: `:nonmonotonic-send`; within
    one op it is `int-nonmonotonic-send`)."""
    spans = (
        _acked(fr)
        .groupBy("process", "key", "index")
        .agg(
            F.min_by("idx", "pos").alias("first_idx"),
            F.max_by("idx", "pos").alias("last_idx"),
            F.min_by("offset", "pos").alias("offset"),
            F.max_by("offset", "pos").alias("last_offset"),
        )
    )
    w = Window.partitionBy("process", "key").orderBy("index")
    d = spans.select(
        "*",
        F.lag("last_idx").over(w).alias("prev_idx"),
        F.lag("last_offset").over(w).alias("prev_offset"),
        F.lag("index").over(w).alias("prev_index"),
    )
    return d.where(F.col("first_idx") <= F.col("prev_idx")).select(
        "process", "key", "prev_index", "index", "prev_offset", "offset"
    )


def int_nonmonotonic_send(fr: Frames) -> DataFrame:
    """Within one op, sends to one key acknowledged at non-increasing offsets (Jepsen: `:int-nonmonotonic-send`)."""
    d = _internal(_acked(fr), ["process", "index", "key"])
    return d.where(F.col("idx") <= F.col("prev_idx")).select("process", "index", "key", "prev_offset", "offset")


def int_send_skip(fr: Frames) -> DataFrame:
    """Within one op, sends to one key acknowledged with a known index between them (Jepsen: `:int-send-skip`)."""
    d = _internal(_acked(fr), ["process", "index", "key"])
    return d.where(F.col("idx") > F.col("prev_idx") + 1).select("process", "index", "key", "prev_offset", "offset")


def divergent_replicas(fr: Frames) -> DataFrame | None:
    """Our addition from the replica dumps: two replicas of a key hold different records at one offset
    below both their high watermarks — committed data that disagrees (seed 001: all ISR replicas hold
    the same committed prefix)."""
    if fr.replicas is None:
        return None
    r = fr.replicas
    return (
        r.groupBy("key", "offset")
        .agg(
            F.array_sort(F.collect_set(F.struct("node", "value", "epoch"))).alias("replicas"),
            F.countDistinct("value").alias("distinct_values"),
        )
        .where(F.col("distinct_values") > 1)
        .select("key", "offset", "replicas")
    )


#: name -> checker, in report order. Every one of these makes a run invalid (DESIGN.md), except
#: `duplicate` for a run whose producers were not idempotent.
CHECKERS: dict[str, Callable[[Frames], DataFrame | None]] = {
    "lost-write": lost_write,
    "unseen": unseen,
    "inconsistent-offsets": inconsistent_offsets,
    "divergent-replicas": divergent_replicas,
    "duplicate": duplicate,
    "unexpected": unexpected,
    "G1a": g1a,
    "poll-skip": poll_skip,
    "nonmonotonic-poll": nonmonotonic_poll,
    "int-poll-skip": int_poll_skip,
    "int-nonmonotonic-poll": int_nonmonotonic_poll,
    "nonmonotonic-send": nonmonotonic_send,
    "int-nonmonotonic-send": int_nonmonotonic_send,
    "int-send-skip": int_send_skip,
}
