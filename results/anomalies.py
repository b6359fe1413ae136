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

#: anomaly -> its definition, in report order. Every one makes a run invalid (DESIGN.md) except
#: `int-send-skip`, `duplicate` for a run whose producers were not idempotent, and `poll-skip` and
#: `nonmonotonic-poll` for a run whose consumers subscribe (`results.check.bad_types`).
DEFINITIONS: dict[str, str] = {
    "lost-write": "An acknowledged send at index i that no poll ever returned, although some poll of the "
    "same key returned an index above i (Jepsen: `:lost-write`). A send that ended `info` has no known "
    "offset, so it can only enter the version order by being read — and then it is not lost.",
    "unseen": "Acknowledged but never polled by anyone, not even the final drain, and at or above every "
    "read index of its key (so not already a lost write); Jepsen's `:unseen`, listed per key.",
    "inconsistent-offsets": "Two different values at one key and offset, seen by any reads, acknowledged "
    "sends, or any replica's committed log (Jepsen: `:inconsistent-offsets`).",
    "divergent-replicas": "Our addition from the replica dumps: two replicas of a key hold different "
    "records at one offset below both their high watermarks — committed data that disagrees.",
    "duplicate": "One value at more than one offset of a key (Jepsen: `:duplicate`), from sends and reads.",
    "unexpected": "A value read that no one ever tried to send (Jepsen: `:unexpected`).",
    "G1a": "Aborted read: a value read whose send definitely failed (Jepsen: `:G1a`).",
    "poll-skip": "A consumer's next poll of a key starts past the index right after its previous poll's "
    "last one, skipping records it knows exist, while the key stayed assigned (Jepsen: `:poll-skip`).",
    "nonmonotonic-poll": "A consumer's next poll of a key starts at or before its previous poll's last "
    "index, while the key stayed assigned (Jepsen: `:nonmonotonic-poll`).",
    "int-poll-skip": "Within one poll of a key, consecutive records jump over a known index, unless a "
    "rebalance during that poll named the key (Jepsen: `:int-poll-skip`).",
    "int-nonmonotonic-poll": "Within one poll of a key, a record at or before the previous one, unless a "
    "rebalance during that poll named the key (Jepsen: `:int-nonmonotonic-poll`).",
    "nonmonotonic-send": "One producer's successive send ops (ok or info) to a key get indices that do not "
    "increase — the next op's first index at or below the previous op's last — while the key stayed in "
    "the process's assignment (Jepsen: `:nonmonotonic-send`).",
    "int-nonmonotonic-send": "Within one op, sends to one key at non-increasing indices "
    "(Jepsen: `:int-nonmonotonic-send`).",
    "int-send-skip": "Within one op, sends to one key with a known index between them "
    "(Jepsen: `:int-send-skip`).",
}


@dataclass(frozen=True)
class Group:
    """Anomalies computed by one query: `sql` yields (run, type, ex) rows from the table `{t}`."""

    types: tuple[str, ...]
    sql: str


def _ex(*cols: str) -> str:
    """The JSON example of a row: `col` or `expr AS name` each."""
    parts = []
    for c in cols:
        expr, _, name = c.partition(" AS ")
        parts.append(f"'{(name or expr).strip('`')}', {expr}")
    return "to_json(named_struct(" + ", ".join(parts) + "))"


def _differing(by: str, col: str, where: str) -> str:
    """The rows (matching `where`) of the (run, key, `by`) groups in which `col` takes more than one
    value. Found with min and max over a window: plain aggregates that spill, on data already
    partitioned by (run, key), so only the few groups found are gathered into sets. A `collect_set`
    over every group instead keeps an object per group and, past a few hundred groups, sorts and
    spills them; merging its spill files ran a 32-run batch out of heap (1 MB of buffer per file)."""
    return (f"SELECT * FROM (SELECT *, min({col}) OVER w <> max({col}) OVER w AS differs FROM {{t}} WHERE {where} "
            f"WINDOW w AS (PARTITION BY run, key, {by})) WHERE differs")


NEVER_POLLED = "kind = 'send' AND type = 'ok' AND idx IS NOT NULL AND NOT polled"
LOST = "idx < max_read_idx"
PER_KEY = "unseen/per-key"


def _spans(t: str, rows: str, kind: str, changes: str) -> str:
    """Per (run, key, process, op) of `rows`: its first and last index, and the same of the process's
    previous op on that key *if the key stayed assigned in between* (else null).

    Assignment changes are rows of the same partition (`changes`: `keep`, an assign/subscribe op
    naming the key; `reset`, a rebalance during a poll naming it). Every op row knows `n_assign`, how
    many assign/subscribe ops its process had completed; between two ops of a key, the key stayed
    assigned iff every assign in between kept it (as many `keep` rows as assigns) and no rebalance
    named it."""
    return f"""
      SELECT *,
        CASE WHEN n_assign - lag(n_assign) OVER p <= keeps - lag(keeps) OVER p
              AND resets = lag(resets) OVER p THEN lag(last_idx) OVER p END AS prev_last_idx,
        CASE WHEN n_assign - lag(n_assign) OVER p <= keeps - lag(keeps) OVER p
              AND resets = lag(resets) OVER p THEN lag(last_offset) OVER p END AS prev_last_offset,
        CASE WHEN n_assign - lag(n_assign) OVER p <= keeps - lag(keeps) OVER p
              AND resets = lag(resets) OVER p THEN lag(index) OVER p END AS prev_index
      FROM (
        SELECT *,
          sum(CASE WHEN kind = 'keep' THEN 1 ELSE 0 END) OVER w AS keeps,
          sum(CASE WHEN kind = 'reset' THEN 1 ELSE 0 END) OVER w AS resets
        FROM (
          SELECT run, key, process, index, '{kind}' AS kind, 1 AS ord,
            min_by(at, pos) AS first_idx, max_by(at, pos) AS last_idx,
            min_by(`offset`, pos) AS first_offset, max_by(`offset`, pos) AS last_offset,
            first(n_assign) AS n_assign
          FROM {t} WHERE {rows} GROUP BY run, key, process, index
          UNION ALL
          SELECT run, key, process, index, kind, 0 AS ord, NULL, NULL, NULL, NULL, NULL
          FROM {t} WHERE kind IN ({changes})
        )
        WINDOW w AS (PARTITION BY run, key, process ORDER BY index, ord
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
      ) WHERE ord = 1
      WINDOW p AS (PARTITION BY run, key, process ORDER BY index)"""


def _internal(t: str, rows: str) -> str:
    """Each row of `rows` with the one before it in its op (same key)."""
    return f"""
      SELECT *, lag(at) OVER o AS prev_idx, lag(`offset`) OVER o AS prev_offset
      FROM {t} WHERE {rows}
      WINDOW o AS (PARTITION BY run, key, process, index ORDER BY pos)"""


POLLS = "kind = 'poll'"
SENDS = "kind = 'send' AND type IN ('ok', 'info')"
SKIP = "first_idx > prev_last_idx + 1"
REWIND = "first_idx <= prev_last_idx"

GROUPS: list[Group] = [
    Group(("lost-write", "unseen", PER_KEY), f"""
      SELECT run, 'lost-write' AS type,
        {_ex('key', '`offset`', 'value', 'process', 'index', 'idx', 'max_read_idx')} AS ex
      FROM {{t}} WHERE {NEVER_POLLED} AND {LOST}
      UNION ALL
      SELECT run, 'unseen', {_ex('key', '`offset`', 'value', 'process', 'index')}
      FROM {{t}} WHERE {NEVER_POLLED} AND NOT coalesce({LOST}, false)
      UNION ALL
      SELECT run, '{PER_KEY}', {_ex('key', 'count')} FROM (
        SELECT run, key, count(*) AS count FROM {{t}} WHERE {NEVER_POLLED} AND NOT coalesce({LOST}, false)
        GROUP BY run, key)"""),
    Group(("inconsistent-offsets",), f"""
      SELECT run, 'inconsistent-offsets', {_ex('key', '`offset`', '`values`', 'seen_by')} FROM (
        SELECT run, key, `offset`, array_sort(collect_set(value)) AS `values`,
          slice(array_sort(collect_set(CASE WHEN kind = 'replica' THEN concat('replica:', process)
                                       ELSE concat(kind, '@', CAST(index AS STRING)) END)), 1, 6) AS seen_by
        FROM ({_differing('`offset`', 'value', "kind IN ('send', 'poll', 'replica') AND `offset` IS NOT NULL")})
        GROUP BY run, key, `offset`)"""),
    Group(("divergent-replicas",), f"""
      SELECT run, 'divergent-replicas', {_ex('key', '`offset`', 'replicas')} FROM (
        SELECT run, key, `offset`,
          array_sort(collect_set(named_struct('node', process, 'value', value, 'epoch', epoch))) AS replicas
        FROM ({_differing('`offset`', 'value', "kind = 'replica'")}) GROUP BY run, key, `offset`)"""),
    Group(("duplicate",), f"""
      SELECT run, 'duplicate', {_ex('key', 'value', 'offsets')} FROM (
        SELECT run, key, value, array_sort(collect_set(`offset`)) AS offsets
        FROM ({_differing('value', '`offset`', "kind IN ('send', 'poll') AND `offset` IS NOT NULL")})
        GROUP BY run, key, value)"""),
    Group(("unexpected", "G1a"), f"""
      SELECT run, 'unexpected', {_ex('key', '`offset`', 'value', 'process', 'index')}
      FROM {{t}} WHERE kind = 'poll' AND NOT sent
      UNION ALL
      SELECT run, 'G1a', {_ex('key', '`offset`', 'value', 'process', 'index', 'failed_at AS send_index')}
      FROM {{t}} WHERE kind = 'poll' AND failed_at IS NOT NULL"""),
    Group(("poll-skip", "nonmonotonic-poll"), f"""
      SELECT run,
        CASE WHEN {SKIP} THEN 'poll-skip' ELSE 'nonmonotonic-poll' END,
        CASE WHEN {SKIP}
          THEN {_ex('process', 'key', 'prev_index', 'index', 'prev_last_offset', 'first_offset',
                    'first_idx - prev_last_idx - 1 AS skipped')}
          ELSE {_ex('process', 'key', 'prev_index', 'index', 'prev_last_offset', 'first_offset')} END
      FROM ({_spans('{t}', POLLS, 'poll', "'keep', 'reset'")})
      WHERE {SKIP} OR {REWIND}"""),
    Group(("int-poll-skip", "int-nonmonotonic-poll"), f"""
      SELECT run, CASE WHEN at > prev_idx + 1 THEN 'int-poll-skip' ELSE 'int-nonmonotonic-poll' END,
        {_ex('process', 'index', 'key', 'prev_offset', '`offset`')}
      FROM ({_internal('{t}', POLLS + ' AND NOT rebalanced')})
      WHERE at > prev_idx + 1 OR at <= prev_idx"""),
    Group(("nonmonotonic-send",), f"""
      SELECT run, 'nonmonotonic-send',
        {_ex('process', 'key', 'prev_index', 'index', 'prev_last_offset AS prev_offset', 'first_offset AS `offset`')}
      FROM ({_spans('{t}', SENDS, 'send', "'keep'")})
      WHERE {REWIND}"""),
    Group(("int-send-skip", "int-nonmonotonic-send"), f"""
      SELECT run, CASE WHEN at > prev_idx + 1 THEN 'int-send-skip' ELSE 'int-nonmonotonic-send' END,
        {_ex('process', 'index', 'key', 'prev_offset', '`offset`')}
      FROM ({_internal('{t}', SENDS)})
      WHERE at > prev_idx + 1 OR at <= prev_idx"""),
]

#: every anomaly, in report order
CHECKERS: list[str] = list(DEFINITIONS)


def group_sql(group: Group, table: str) -> str:
    """The group's query over `table`, its columns named run, type, ex."""
    return f"SELECT * FROM ({group.sql.replace('{t}', table)}) AS g(run, type, ex)"
