"""The anomaly checkers: SQL over the one keyed table of `results.frames`, each row an anomaly of a run.

Definitions follow Jepsen's Kafka checker (jepsen-io/jepsen, `jepsen/src/jepsen/tests/kafka.clj`),
restated in `DEFINITIONS` so a reader does not need Clojure. "Index" means a position in the key's
*version order*: every offset of the key that anyone observed (acknowledged sends and polls),
sorted; a gap in indices is a record someone knows exists. A row's index (`at`) is its offset's place
in that order, or, for a send whose offset is unknown, its value's (Jepsen's `by-value`). Examples
carry the op indices, processes, offsets and values a person needs to find the anomaly.

Each checker is a filter, an aggregate or a window over the table's (run, key) partitioning: no
joins, no further shuffles. Anomalies that share their work are one *group* (`GROUPS`): one query
whose rows are tagged with their type, e.g. `poll-skip` and `nonmonotonic-poll` from one pass over a
consumer's successive polls. They are written as SQL, not DataFrame calls: the whole check is one
statement, analysed once, which for a small history is most of the fixed cost of building it.

The checks of one consumer's (or producer's) successive ops forget a key's last read (or send) only
when the key leaves the process's assignment (Jepsen's rule): an assign or subscribe op that does
not name the key, or a rebalance during a poll (its `rebalance-log`) that revokes or assigns it. An
assign that keeps a key keeps its position, as Kafka's `KafkaConsumer.assign` does.

Under `subscribe` (test.json `"sub_via"` naming it) the broker may move a key between consumers at
any time, so `poll-skip` and `nonmonotonic-poll` are reported but not bad (Jepsen's
`allowed-error-types`); `results.check.bad_types` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

#: anomaly -> its definition, in report order. Every one makes a run invalid (docs/design.md, "Anomalies") except
#: `int-send-skip`, `duplicate` for a run whose producers were not idempotent, and `poll-skip` and
#: `nonmonotonic-poll` for a run whose consumers subscribe (`results.check.bad_types`).
DEFINITIONS: dict[str, str] = {
    "lost-write": "A send that must have committed (its op completed ok, or info and an ok poll read one "
    "of its values) at index i that no ok poll ever returned, although an ok poll of the same key returned "
    "an index above i (Jepsen: `:lost-write`). A send's index is its offset's, or its value's when only a "
    "poll placed it.",
    "unseen": "Acknowledged (ok) but never returned by an ok poll, not even the final drain's, and not "
    "below any ok read of its key (so not already a lost write); Jepsen's `:unseen`, listed per key.",
    "inconsistent-offsets": "Two different values at one key and offset, seen by any polls (of any outcome), "
    "sends that must have committed, or any replica's committed log (Jepsen: `:inconsistent-offsets`).",
    "divergent-replicas": "Our addition from the replica dumps: two replicas of a key hold different "
    "records at one offset below both their high watermarks — committed data that disagrees.",
    "duplicate": "One value at more than one offset of a key (Jepsen: `:duplicate`), from the version order: "
    "polls of any outcome and sends that must have committed.",
    "unexpected": "A value read (by a poll of any outcome) that no one ever tried to send; Jepsen's checker "
    "throws `no-writer-of-value` on it.",
    "G1a": "Aborted read: an ok poll read a value whose send definitely failed — a failed send op or an "
    "aborted transaction (Jepsen: `:G1a`).",
    "precommitted-read": "A transaction polled a value it sent itself: read committed consumers must never see "
    "a record before its transaction commits (Jepsen: `:precommitted-read`).",
    "poll-skip": "A consumer's poll of a key (of any outcome) starts past the index right after the last "
    "one its previous ok poll of the key read, skipping records it knows exist, while the key stayed "
    "assigned (Jepsen: `:poll-skip`; an aborted poll does not move the consumer on).",
    "nonmonotonic-poll": "A consumer's poll of a key (of any outcome) starts at or before the last index "
    "its previous ok poll of the key read, while the key stayed assigned (Jepsen: `:nonmonotonic-poll`).",
    "int-poll-skip": "Within one poll of a key, consecutive records jump over a known index, unless a "
    "rebalance during that poll named the key (Jepsen: `:int-poll-skip`).",
    "int-nonmonotonic-poll": "Within one poll of a key, a record at or before the previous one, unless a "
    "rebalance during that poll named the key (Jepsen: `:int-nonmonotonic-poll`).",
    "nonmonotonic-send": "One producer's successive send ops (ok or info) to a key get indices that do not "
    "increase — the next op's first index at or below the previous op's last — while the key stayed in "
    "the process's assignment (Jepsen: `:nonmonotonic-send`).",
    "int-nonmonotonic-send": "Within one op (of any outcome), sends to one key at non-increasing indices "
    "(Jepsen: `:int-nonmonotonic-send`).",
    "int-send-skip": "Within one op (of any outcome), sends to one key with a known index between them "
    "(Jepsen: `:int-send-skip`).",
}


@dataclass(frozen=True)
class Group:
    """Anomalies computed by one query: `sql` yields (run, type, ex) rows from the keyed table `{t}`
    and the replica dumps' table `{r}` (`results.frames.Frames`)."""

    types: tuple[str, ...]
    sql: str


def _ex(*cols: str) -> str:
    """The JSON example of a row: `col` or `expr AS name` each."""
    parts = []
    for c in cols:
        expr, _, name = c.partition(" AS ")
        parts.append(f"'{(name or expr).strip('`')}', {expr}")
    return "to_json(named_struct(" + ", ".join(parts) + "))"


def _differing(by: str, col: str, rows: str) -> str:
    """The rows of the query `rows` whose (run, key, `by`) group has more than one value of `col`.
    Found with min and max over a window: plain aggregates that spill, on data already partitioned
    by (run, key), so only the few groups found are gathered into sets. A `collect_set`
    over every group instead keeps an object per group and, past a few hundred groups, sorts and
    spills them; merging its spill files, each with a buffer of its own, ran a 32-run batch out of heap
    (docs/measurements/check.md, "Figures first recorded in code comments")."""
    return (f"SELECT * FROM (SELECT *, min({col}) OVER w <> max({col}) OVER w AS differs FROM ({rows}) "
            f"WINDOW w AS (PARTITION BY run, key, {by})) WHERE differs")


#: what the log comparisons read of a row: its offset and value, and who saw it
LOGGED = "run, key, kind, process, index, `offset`, value"
#: the replica dumps' committed records (`results.frames.Frames.replicas`), with no op index
REPLICA_ROWS = "SELECT run, key, kind, process, CAST(NULL AS BIGINT) AS index, `offset`, value FROM {r}"


LOSABLE = "kind = 'send' AND committed AND at IS NOT NULL AND NOT polled"
UNREAD = "kind = 'send' AND type = 'ok' AND NOT polled"
LOST = "at < max_read_idx"
PER_KEY = "unseen/per-key"


def _spans(t: str, rows: str, kind: str, changes: str, counts: str) -> str:
    """Per (run, key, process, op) of `rows`: its first and last index, and the same of the process's
    previous op on that key that `counts` (an ok poll: Jepsen moves a consumer on only at an ok poll;
    any send op here), *if the key stayed assigned in between* (else null).

    Assignment changes are rows of the same partition (`changes`: `keep`, an assign/subscribe op
    naming the key; `reset`, a rebalance during a poll naming it). Every op row knows `n_assign`, how
    many assign/subscribe ops its process had completed; between two ops of a key, the key stayed
    assigned iff every assign in between kept it (as many `keep` rows as assigns) and no rebalance
    named it."""
    def prev(col: str) -> str:
        return f"last(CASE WHEN counts THEN {col} END, true) OVER p"

    stayed = (f"n_assign - {prev('n_assign')} <= keeps - {prev('keeps')} AND resets = {prev('resets')}")
    return f"""
      SELECT *,
        CASE WHEN {stayed} THEN {prev('last_idx')} END AS prev_last_idx,
        CASE WHEN {stayed} THEN {prev('last_offset')} END AS prev_last_offset,
        CASE WHEN {stayed} THEN {prev('index')} END AS prev_index
      FROM (
        SELECT *,
          sum(CASE WHEN kind = 'keep' THEN 1 ELSE 0 END) OVER w AS keeps,
          sum(CASE WHEN kind = 'reset' THEN 1 ELSE 0 END) OVER w AS resets
        FROM (
          SELECT run, key, process, index, '{kind}' AS kind, 1 AS ord,
            min_by(at, pos) AS first_idx, max_by(at, pos) AS last_idx,
            min_by(`offset`, pos) AS first_offset, max_by(`offset`, pos) AS last_offset,
            first(n_assign) AS n_assign, first({counts}) AS counts
          FROM {t} WHERE {rows} GROUP BY run, key, process, index
          UNION ALL
          SELECT run, key, process, index, kind, 0 AS ord, NULL, NULL, NULL, NULL, NULL, NULL
          FROM {t} WHERE kind IN ({changes})
        )
        WINDOW w AS (PARTITION BY run, key, process ORDER BY index, ord
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
      ) WHERE ord = 1
      WINDOW p AS (PARTITION BY run, key, process ORDER BY index ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"""


def _internal(t: str, rows: str) -> str:
    """Each row of `rows` with the one before it in its op (same key)."""
    return f"""
      SELECT *, lag(at) OVER o AS prev_idx, lag(`offset`) OVER o AS prev_offset
      FROM {t} WHERE {rows}
      WINDOW o AS (PARTITION BY run, key, process, index ORDER BY pos)"""


POLLS = "kind = 'poll'"
SENDS = "kind = 'send' AND type IN ('ok', 'info')"
ALL_SENDS = "kind = 'send'"
SKIP = "first_idx > prev_last_idx + 1"
REWIND = "first_idx <= prev_last_idx"

GROUPS: list[Group] = [
    Group(("lost-write", "unseen", PER_KEY), f"""
      SELECT run, 'lost-write' AS type,
        {_ex('key', '`offset`', 'value', 'process', 'index', 'idx', 'max_read_idx')} AS ex
      FROM {{t}} WHERE {LOSABLE} AND {LOST}
      UNION ALL
      SELECT run, 'unseen', {_ex('key', '`offset`', 'value', 'process', 'index')}
      FROM {{t}} WHERE {UNREAD} AND NOT coalesce({LOST}, false)
      UNION ALL
      SELECT run, '{PER_KEY}', {_ex('key', 'count')} FROM (
        SELECT run, key, count(*) AS count FROM {{t}} WHERE {UNREAD} AND NOT coalesce({LOST}, false)
        GROUP BY run, key)"""),
    Group(("inconsistent-offsets",), f"""
      SELECT run, 'inconsistent-offsets', {_ex('key', '`offset`', '`values`', 'seen_by')} FROM (
        SELECT run, key, `offset`, array_sort(collect_set(value)) AS `values`,
          slice(array_sort(collect_set(CASE WHEN kind = 'replica' THEN concat('replica:', process)
                                       ELSE concat(kind, '@', CAST(index AS STRING)) END)), 1, 6) AS seen_by
        FROM ({_differing('`offset`', 'value',
                          f"SELECT {LOGGED} FROM {{t}} WHERE in_vo AND `offset` IS NOT NULL UNION ALL {REPLICA_ROWS}")})
        GROUP BY run, key, `offset`)"""),
    Group(("divergent-replicas",), f"""
      SELECT run, 'divergent-replicas', {_ex('key', '`offset`', 'replicas')} FROM (
        SELECT run, key, `offset`,
          array_sort(collect_set(named_struct('node', process, 'value', value, 'epoch', epoch))) AS replicas
        FROM ({_differing('`offset`', 'value', "SELECT * FROM {r}")}) GROUP BY run, key, `offset`)"""),
    Group(("duplicate",), f"""
      SELECT run, 'duplicate', {_ex('key', 'value', 'offsets')} FROM (
        SELECT run, key, value, array_sort(collect_set(`offset`)) AS offsets
        FROM ({_differing('value', '`offset`', "SELECT * FROM {t} WHERE in_vo")})
        GROUP BY run, key, value)"""),
    Group(("unexpected", "G1a", "precommitted-read"), f"""
      SELECT run, 'unexpected', {_ex('key', '`offset`', 'value', 'process', 'index', 'type')}
      FROM {{t}} WHERE kind = 'poll' AND NOT sent
      UNION ALL
      SELECT run, 'G1a', {_ex('key', '`offset`', 'value', 'process', 'index', 'failed_at AS send_index')}
      FROM {{t}} WHERE kind = 'poll' AND type = 'ok' AND failed_at IS NOT NULL
      UNION ALL
      SELECT run, 'precommitted-read', {_ex('key', '`offset`', 'value', 'process', 'index', 'type')}
      FROM {{t}} WHERE kind = 'poll' AND (writer = index OR first_writer = index)"""),
    Group(("poll-skip", "nonmonotonic-poll"), f"""
      SELECT run,
        CASE WHEN {SKIP} THEN 'poll-skip' ELSE 'nonmonotonic-poll' END,
        CASE WHEN {SKIP}
          THEN {_ex('process', 'key', 'prev_index', 'index', 'prev_last_offset', 'first_offset',
                    'first_idx - prev_last_idx - 1 AS skipped')}
          ELSE {_ex('process', 'key', 'prev_index', 'index', 'prev_last_offset', 'first_offset')} END
      FROM ({_spans('{t}', POLLS, 'poll', "'keep', 'reset'", "type = 'ok'")})
      WHERE {SKIP} OR {REWIND}"""),
    Group(("int-poll-skip", "int-nonmonotonic-poll"), f"""
      SELECT run, CASE WHEN at > prev_idx + 1 THEN 'int-poll-skip' ELSE 'int-nonmonotonic-poll' END,
        {_ex('process', 'index', 'key', 'prev_offset', '`offset`')}
      FROM ({_internal('{t}', POLLS + ' AND NOT rebalanced')})
      WHERE at > prev_idx + 1 OR at <= prev_idx"""),
    Group(("nonmonotonic-send",), f"""
      SELECT run, 'nonmonotonic-send',
        {_ex('process', 'key', 'prev_index', 'index', 'prev_last_offset AS prev_offset', 'first_offset AS `offset`')}
      FROM ({_spans('{t}', SENDS, 'send', "'keep'", "true")})
      WHERE {REWIND}"""),
    Group(("int-send-skip", "int-nonmonotonic-send"), f"""
      SELECT run, CASE WHEN at > prev_idx + 1 THEN 'int-send-skip' ELSE 'int-nonmonotonic-send' END,
        {_ex('process', 'index', 'key', 'prev_offset', '`offset`')}
      FROM ({_internal('{t}', ALL_SENDS)})
      WHERE at > prev_idx + 1 OR at <= prev_idx"""),
]

#: every anomaly, in report order
CHECKERS: list[str] = list(DEFINITIONS)


def group_sql(group: Group, table: str, replicas: str) -> str:
    """The group's query over the keyed table `table` and the replica table `replicas`, its columns
    named run, type, ex."""
    return f"SELECT * FROM ({group.sql.replace('{t}', table).replace('{r}', replicas)}) AS g(run, type, ex)"

#: The cycle anomalies (`results.cycles`), found in the driver from the edges below and the ops' real-time
#: order; named here so every anomaly has its definition in one place (`CHECKERS` is the report order).
DEFINITIONS.update({
    "G0": "Write cycle: transactions whose sends, ordered by offset (ww edges), form a cycle — one sent "
    "before the other on one key and after it on another. Reported, never bad: Kafka does not isolate "
    "writes (Jepsen allows G0).",
    "G1c": "Circular information flow: a cycle of wr edges (one transaction polled what the other sent), "
    "perhaps with ww edges. Bad when the cycle needs no ww edge (as Jepsen finds it by default); one "
    "that does is Kafka's normal interleaving of writes (Jepsen with --ww-deps allows it).",
    "G0-realtime": "A cycle of ww edges and real-time order (an ok op completed before the other was "
    "invoked): sends acknowledged in one order whose offsets say the other. Reported, never bad (as Jepsen).",
    "G1c-realtime": "A cycle that needs both wr edges and real-time order: a poll read what was sent only "
    "after the poll completed (with ww edges: ordered before it). Bad when it needs no ww edge.",
    "empty-transaction-graph": "Nothing was sent or polled: the history holds no send, poll or txn op, so "
    "there is nothing to judge (Jepsen: `:empty-transaction-graph`, invalid).",
})
CHECKERS[:] = list(DEFINITIONS)

#: the ww and wr edges between ops (completion indices) that `results.cycles` searches: wr from the op
#: that sent a value to every op (of any outcome) that polled it, ww from the op that sent the value just
#: before in the key's version order (Jepsen's by-index: one value per index, here the smallest) to the
#: op that sent the next, each value taken at its last index (Jepsen's by-value). One row per edge.
#: A wr edge whose writer completed ok before its reader was invoked is left out here (most of them:
#: a history reads what was sent long before): the real-time order already leads from the one to the
#: other, so the strongly connected components are the same without it; `FORWARD` fetches those edges
#: back, only between the ops of the few nontrivial components, where naming a cycle needs them.
WR_ROWS = "{p}kind = 'poll' AND {p}writer IS NOT NULL AND {p}writer <> {p}index"
FORWARD_WR = "{p}ok_writer = {p}writer AND {p}writer < {p}invoke"
EDGES = f"""
  SELECT DISTINCT run, writer AS src, index AS dst, 1 AS rel FROM {{t}}
  WHERE {WR_ROWS.format(p="")} AND NOT coalesce({FORWARD_WR.format(p="")}, false)
  UNION ALL
  SELECT DISTINCT run, prev_writer, writer, 0 FROM (
    SELECT run, idx, vidx, writer,
      last(chosen) OVER (PARTITION BY run, key ORDER BY idx RANGE BETWEEN 1 PRECEDING AND 1 PRECEDING) AS prev_writer
    FROM (SELECT run, key, idx, vidx, writer, min_by(writer, value) OVER (PARTITION BY run, key, idx) AS chosen
          FROM {{t}} WHERE idx IS NOT NULL))
  WHERE idx = vidx AND writer IS NOT NULL AND prev_writer IS NOT NULL AND prev_writer <> writer"""
#: the wr edges `EDGES` leaves out, between ops of the table `{m}` (run, index): both ends must be in it
FORWARD = f"""
  SELECT /*+ BROADCAST(a), BROADCAST(b) */ DISTINCT t.run, t.writer AS src, t.index AS dst, 1 AS rel FROM {{t}} t
  JOIN {{m}} a ON t.run = a.run AND t.index = a.index
  JOIN {{m}} b ON t.run = b.run AND t.writer = b.index
  WHERE {WR_ROWS.format(p="t.")} AND {FORWARD_WR.format(p="t.")}"""
