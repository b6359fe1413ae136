"""The anomaly checkers: each a function Frames -> DataFrame with one row per anomaly (and its `run`).

Definitions follow Jepsen's Kafka checker (jepsen-io/jepsen, `jepsen/src/jepsen/tests/kafka.clj`),
restated here so a reader does not need Clojure. "Index" means a position in the key's *version
order*: every offset of the key that anyone observed (acknowledged sends and polls), sorted; a gap
in indices is a record someone knows exists. A row's index is its offset's place in that order, or,
for a send whose offset is unknown, its value's (Jepsen's `by-value`). Rows carry the op indices,
processes, offsets and values a person needs to find the anomaly in the history.

Every checker reads the one keyed table of `results.frames` (partitioned by run and key), so each
is a filter, an aggregate or a window over that partitioning: no joins, no further shuffles. The
checks of one consumer's (or producer's) successive ops forget a key's last read (or send) only when
the key leaves the process's assignment (Jepsen's rule): an assign or subscribe op that does not
name the key, or a rebalance during a poll (its `rebalance-log`) that revokes or assigns it. An
assign that keeps a key keeps its position, as Kafka's `KafkaConsumer.assign` does.

Under `subscribe` (test.json `"sub_via"` naming it) the broker may move a key between consumers at
any time, so `poll-skip` and `nonmonotonic-poll` are reported but not bad (Jepsen's
`allowed-error-types`); `results.check.bad_types` says so.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from results.frames import Frames


def _kind(fr: Frames, *kinds: str) -> DataFrame:
    return fr.facts.where(F.col("kind").isin(*kinds))


def _seen_at(fr: Frames) -> DataFrame:
    """Rows that place a value at an offset: acknowledged sends, reads, replicas' committed records."""
    return _kind(fr, "send", "poll", "replica").where(F.col("offset").isNotNull())


def inconsistent_offsets(fr: Frames) -> DataFrame:
    """Two different values at one key and offset, seen by any reads, acknowledged sends, or any
    replica's committed log (Jepsen: `:inconsistent-offsets`)."""
    seen_by = (
        F.when(F.col("kind") == "replica", F.concat(F.lit("replica:"), "process"))
        .otherwise(F.concat(F.col("kind"), F.lit("@"), F.col("index").cast("string")))
    )
    return (
        _seen_at(fr)
        .groupBy("run", "key", "offset")
        .agg(
            F.array_sort(F.collect_set("value")).alias("values"),
            F.slice(F.array_sort(F.collect_set(seen_by)), 1, 6).alias("seen_by"),
        )
        .where(F.size("values") > 1)
    )


def duplicate(fr: Frames) -> DataFrame:
    """One value at more than one offset of a key (Jepsen: `:duplicate`), from sends and reads."""
    return (
        _kind(fr, "send", "poll")
        .where(F.col("offset").isNotNull())
        .groupBy("run", "key", "value")
        .agg(F.array_sort(F.collect_set("offset")).alias("offsets"))
        .where(F.size("offsets") > 1)
    )


def unexpected(fr: Frames) -> DataFrame:
    """A value read that no one ever tried to send (Jepsen: `:unexpected`)."""
    return _kind(fr, "poll").where(~F.col("sent")).select("run", "key", "offset", "value", "process", "index")


def g1a(fr: Frames) -> DataFrame:
    """Aborted read: a value read whose send definitely failed (Jepsen: `:G1a`)."""
    return _kind(fr, "poll").where(F.col("failed_at").isNotNull()).select(
        "run", "key", "offset", "value", "process", "index", F.col("failed_at").alias("send_index"))


def _never_polled(fr: Frames) -> DataFrame:
    """Acknowledged sends with a known offset whose value no poll returned."""
    return _kind(fr, "send").where((F.col("type") == "ok") & F.col("idx").isNotNull() & ~F.col("polled"))


def lost_write(fr: Frames) -> DataFrame:
    """An acknowledged send at index i that no poll ever returned, although some poll of the same key
    returned an index above i (Jepsen: `:lost-write`). A send that ended `info` has no known offset, so
    it can only enter the version order by being read — and then it is not lost."""
    return _never_polled(fr).where(F.col("idx") < F.col("max_read_idx")).select(
        "run", "key", "offset", "value", "process", "index", "idx", "max_read_idx")


def unseen(fr: Frames) -> DataFrame:
    """Acknowledged but never polled by anyone, not even the final drain, and above every read index of
    its key (so not already a lost write); Jepsen's `:unseen`, listed per key."""
    return _never_polled(fr).where(F.col("max_read_idx").isNull() | (F.col("idx") >= F.col("max_read_idx"))).select(
        "run", "key", "offset", "value", "process", "index")


def _spans(fr: Frames, rows: DataFrame, kind: str, *, rebalances: bool) -> DataFrame:
    """Per (run, key, process, op) of `rows` (of `kind`): the first and last index the op touched, and the same of
    the process's previous op on that key *if the key stayed assigned in between* (else null).

    The process's assignment changes are rows of the same partition: `keep` (an assign/subscribe op
    naming the key) and, when `rebalances`, `reset` (a rebalance during a poll naming it). Every op
    row knows `n_assign`, how many assign/subscribe ops its process had completed; so between two ops
    of a key, the key stayed assigned iff every assign in between kept it (as many `keep` rows as
    assigns) and no rebalance named it."""
    ops = (
        rows.groupBy("run", "key", "process", "index")
        .agg(
            F.min_by("at", "pos").alias("first_idx"),
            F.max_by("at", "pos").alias("last_idx"),
            F.min_by("offset", "pos").alias("first_offset"),
            F.max_by("offset", "pos").alias("last_offset"),
            F.first("n_assign").alias("n_assign"),
            F.lit(1).alias("ord"),
        )
    )
    changes = _kind(fr, "keep", "reset") if rebalances else _kind(fr, "keep")
    marks = changes.select(
        "run", "key", "process", "index", *(F.lit(None).cast("long").alias(c) for c in (
            "first_idx", "last_idx", "first_offset", "last_offset", "n_assign")),
        F.lit(0).alias("ord"), F.col("kind"))
    seq = Window.partitionBy("run", "key", "process").orderBy("index", "ord")
    upto = seq.rowsBetween(Window.unboundedPreceding, 0)
    both = ops.select("*", F.lit(kind).alias("kind")).unionByName(marks).select(
        "*",
        F.sum((F.col("kind") == "keep").cast("long")).over(upto).alias("keeps"),
        F.sum((F.col("kind") == "reset").cast("long")).over(upto).alias("resets"),
    )
    only = both.where(F.col("ord") == 1)
    prev = Window.partitionBy("run", "key", "process").orderBy("index")

    def lag(c: str) -> Column:
        return F.lag(c).over(prev)

    stayed = ((F.col("n_assign") - lag("n_assign")) <= (F.col("keeps") - lag("keeps"))) & (
        F.col("resets") == lag("resets"))
    return only.select(
        "*",
        F.when(stayed, lag("last_idx")).alias("prev_last_idx"),
        F.when(stayed, lag("last_offset")).alias("prev_last_offset"),
        F.when(stayed, lag("index")).alias("prev_index"),
    )


def poll_skip(fr: Frames) -> DataFrame:
    """A consumer's next poll of a key starts past the index right after its previous poll's last one,
    skipping records it knows exist, while the key stayed assigned (Jepsen: `:poll-skip`)."""
    s = _spans(fr, _kind(fr, "poll"), "poll", rebalances=True)
    return s.where(F.col("first_idx") > F.col("prev_last_idx") + 1).select(
        "run",
        "process",
        "key",
        "prev_index",
        "index",
        "prev_last_offset",
        "first_offset",
        (F.col("first_idx") - F.col("prev_last_idx") - 1).alias("skipped"),
    )


def nonmonotonic_poll(fr: Frames) -> DataFrame:
    """A consumer's next poll of a key starts at or before its previous poll's last index, while the
    key stayed assigned (Jepsen: `:nonmonotonic-poll`)."""
    s = _spans(fr, _kind(fr, "poll"), "poll", rebalances=True)
    return s.where(F.col("first_idx") <= F.col("prev_last_idx")).select(
        "run", "process", "key", "prev_index", "index", "prev_last_offset", "first_offset"
    )


def _internal(df: DataFrame) -> DataFrame:
    w = Window.partitionBy("run", "key", "process", "index").orderBy("pos")
    return df.select("*", F.lag("at").over(w).alias("prev_idx"), F.lag("offset").over(w).alias("prev_offset"))


def _int_polls(fr: Frames) -> DataFrame:
    """Reads within one poll op, each with the one before it of the same key — unless a rebalance
    during that poll named the key (Jepsen then expects no order within the op)."""
    return _internal(_kind(fr, "poll").where(~F.col("rebalanced")))


def int_poll_skip(fr: Frames) -> DataFrame:
    """Within one poll of a key, consecutive records jump over a known index (Jepsen: `:int-poll-skip`)."""
    d = _int_polls(fr)
    return d.where(F.col("at") > F.col("prev_idx") + 1).select(
        "run", "process", "index", "key", "prev_offset", "offset")


def int_nonmonotonic_poll(fr: Frames) -> DataFrame:
    """Within one poll of a key, a record at or before the previous one (Jepsen: `:int-nonmonotonic-poll`)."""
    d = _int_polls(fr)
    return d.where(F.col("at") <= F.col("prev_idx")).select(
        "run", "process", "index", "key", "prev_offset", "offset")


def _sends(fr: Frames) -> DataFrame:
    """Sends of ok and info ops (Jepsen reads the writes of every completed op; a value's index places
    an info send that was read)."""
    return _kind(fr, "send").where(F.col("type").isin("ok", "info"))


def nonmonotonic_send(fr: Frames) -> DataFrame:
    """One producer's successive send ops to a key get indices that do not increase: the next op's
    first index is at or below the previous op's last, while the key stayed in the process's
    assignment (Jepsen: `:nonmonotonic-send`; within one op it is `int-nonmonotonic-send`)."""
    s = _spans(fr, _sends(fr), "send", rebalances=False)
    return s.where(F.col("first_idx") <= F.col("prev_last_idx")).select(
        "run", "process", "key", "prev_index", "index", F.col("prev_last_offset").alias("prev_offset"),
        F.col("first_offset").alias("offset"))


def int_nonmonotonic_send(fr: Frames) -> DataFrame:
    """Within one op, sends to one key at non-increasing indices (Jepsen: `:int-nonmonotonic-send`)."""
    d = _internal(_sends(fr))
    return d.where(F.col("at") <= F.col("prev_idx")).select(
        "run", "process", "index", "key", "prev_offset", "offset")


def int_send_skip(fr: Frames) -> DataFrame:
    """Within one op, sends to one key with a known index between them (Jepsen: `:int-send-skip`)."""
    d = _internal(_sends(fr))
    return d.where(F.col("at") > F.col("prev_idx") + 1).select(
        "run", "process", "index", "key", "prev_offset", "offset")


def divergent_replicas(fr: Frames) -> DataFrame | None:
    """Our addition from the replica dumps: two replicas of a key hold different records at one offset
    below both their high watermarks — committed data that disagrees (seed 001: all ISR replicas hold
    the same committed prefix)."""
    if not fr.has_replicas:
        return None
    return (
        _kind(fr, "replica")
        .groupBy("run", "key", "offset")
        .agg(
            F.array_sort(F.collect_set(F.struct(F.col("process").alias("node"), "value", "epoch"))).alias("replicas"),
            F.countDistinct("value").alias("distinct_values"),
        )
        .where(F.col("distinct_values") > 1)
        .select("run", "key", "offset", "replicas")
    )


#: name -> checker, in report order. Every one of these makes a run invalid (DESIGN.md), except
#: `int-send-skip`, `duplicate` for a run whose producers were not idempotent, and `poll-skip` and
#: `nonmonotonic-poll` for a run whose consumers subscribe (`results.check.bad_types`).
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
