"""The Spark jobs of one batch over its keyed table (`results.frames`), run side by side: the anomaly
statement in two halves and the dependency edges of the cycle search.

Why side by side: each job over a small table is one task, on one core, and a real `make run`
history (10^4 ops, 10^5 rows with its replica dumps) spends seconds in each; on this project's
two-core machines the other core sat idle. The halves and the edges share nothing but the cached
table, so they are submitted from threads of their own (pyspark pins each Python thread to a JVM
thread; a Connect session runs each request as its own operation) and Spark's scheduler runs
their tasks on every core. The anomaly groups are split between the halves in alternation: their
costs measured on a real run then come out nearly equal (docs/measurements/check.md, "Figures first
recorded in code comments").

A failed job is still told apart from a crashed checker (STYLE.md 7: a crash is never a pass): a
half that fails is run again group by group, so the checker that crashes is named and reported
"unknown" while the others still count; a Spark that cannot run anything more (a dead JVM, a
server gone) is an `EnvironmentProblem`, said once, never blamed on every checker.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa

from kernel.errors import EnvironmentProblem
from kernel.history.columns import ColumnFiles
from results.anomalies import CHECKERS, GROUPS, PER_KEY, Group, group_sql
from results.background import run_all

log = logging.getLogger(__name__)

#: examples kept per anomaly type and run
EXAMPLES = 8
#: how many parts the anomaly statement is cut into (each one job, run at once)
HALVES = 2

Found = dict[int, dict[str, dict[str, Any]]]  # run -> anomaly type -> {"count", "examples", ...}
_views = itertools.count()


@dataclass
class Judged:
    """What the jobs found for every run of the batch."""

    found: Found = field(default_factory=dict)
    crashed: list[str] = field(default_factory=list)  # checkers that could not run: their verdict is unknown
    warnings: list[str] = field(default_factory=list)

    def merge(self, found: Found) -> None:
        for run, types in found.items():
            self.found.setdefault(run, {}).update(types)


def _collect(spark: Any, queries: list[str]) -> Found:
    """One Spark action for the given anomaly queries over every run: count and sample per (run,
    type); `unseen/per-key` rows are kept whole (one per key)."""
    if not queries:
        return {}
    union = "\nUNION ALL\n".join(queries)
    # examples: the first few of each (run, type) in text order — bounded before they are gathered
    # (an anomaly type may have hundreds of thousands of rows) and the same on every check
    rows = spark.sql(f"""
        SELECT run, type, count(*) AS n,
          array_sort(collect_list(CASE WHEN nth <= {EXAMPLES} OR type = '{PER_KEY}' THEN ex END)) AS ex
        FROM (SELECT run, type, ex, row_number() OVER (PARTITION BY run, type ORDER BY ex) AS nth FROM ({union}))
        GROUP BY run, type""").collect()
    out: Found = {}
    for r in rows:
        out.setdefault(int(r["run"]), {})[r["type"]] = {
            "count": int(r["n"]), "examples": [json.loads(x) for x in r["ex"]]}
    return out


def _spark_problem(spark: Any, e: BaseException) -> EnvironmentProblem | None:
    from results.spark import spark_problem

    problem = spark_problem(spark, e)
    return None if problem is None else EnvironmentProblem(problem)


def _checkers(spark: Any, views: tuple[str, str], groups: Sequence[Group]) -> Judged:
    """Some anomaly groups over the (keyed table, replica table) `views` in one statement; if that
    fails, group by group, naming the culprit."""
    out = Judged()
    try:
        out.merge(_collect(spark, [group_sql(g, *views) for g in groups]))
        return out
    except Exception as e:
        if (problem := _spark_problem(spark, e)) is not None:  # nothing more can run: say so
            raise problem from None
        log.warning("a combined check job failed; running its checkers group by group to find the culprit")
    for g in groups:
        try:
            out.merge(_collect(spark, [group_sql(g, *views)]))
        except Exception as e:
            if (problem := _spark_problem(spark, e)) is not None:
                raise problem from None
            names = [t for t in g.types if t != PER_KEY]
            out.crashed.extend(names)
            out.warnings.append(f"checker {', '.join(names)} crashed: {type(e).__name__}: "
                                f"{str(e).splitlines()[0][:200]}")
    return out


def _cycles(fr: Any, runs: Sequence[tuple[int, ColumnFiles]]) -> Judged:
    """The dependency cycles of every run (`results.cycles`): the ww and wr edges from Spark (as Arrow),
    each run's real-time order from its ops table, the search in this process. The wr edges that real
    time already implies come back in a second, small action, only between the ops of the nontrivial
    components (`results.anomalies.FORWARD`). A search that fails is a crashed checker ("unknown"),
    never a pass."""
    from results.anomalies import EDGES, FORWARD
    from results.cycles import CYCLE_TYPES, build, cyclic_ops, find_cycles, with_edges

    spark = fr.facts.sparkSession
    n = next(_views)
    view, members = f"chaos_edges_{n}", f"chaos_members_{n}"
    fr.facts.createOrReplaceTempView(view)
    out = Judged()
    try:
        edges = _split(spark.sql(EDGES.replace("{t}", view)).toArrow(), "run")
        graphs, cyclic = {}, []
        for run, columns in runs:
            e = edges.get(run, {"src": [], "dst": [], "rel": []})
            graphs[run] = g = build(e["src"], e["dst"], e["rel"], mop_ops(columns))
            cyclic += [(run, int(i)) for i in cyclic_ops(g)]
        extra: dict[int, dict[str, Any]] = {}
        if cyclic:
            spark.createDataFrame(cyclic, "run INT, index BIGINT").createOrReplaceTempView(members)
            extra = _split(spark.sql(FORWARD.replace("{t}", view).replace("{m}", members)).toArrow(), "run")
        for run, _ in runs:
            g = graphs[run]
            if run in extra:
                g = with_edges(g, extra[run]["src"], extra[run]["dst"], extra[run]["rel"])
            if cycles := find_cycles(g):
                out.merge({run: {k: v.to_json() for k, v in cycles.items()}})
    except Exception as e:
        if (problem := _spark_problem(spark, e)) is not None:
            raise problem from None
        out.crashed.extend(CYCLE_TYPES)
        out.warnings.append(f"checker {', '.join(CYCLE_TYPES)} crashed: {type(e).__name__}: "
                            f"{str(e).splitlines()[0][:200]}")
    finally:
        _drop_views(spark, view, members)
    return out


def _drop_views(spark: Any, *views: str) -> None:
    from results.spark import jvm_alive

    if jvm_alive(spark):  # a dead JVM's refused connection would hide why it died
        for v in views:
            spark.catalog.dropTempView(v)


def judge_table(fr: Any, runs: Sequence[tuple[int, ColumnFiles]]) -> Judged:
    """Every checker and the cycle search over the batch's table `fr` (`results.frames.Frames`), whose
    runs are (run number, columns); the jobs run at once. Types per run come in report order, the
    unseen values' per-key counts folded into `unseen`."""
    spark = fr.facts.sparkSession
    n = next(_views)
    views = f"chaos_facts_{n}", f"chaos_replica_rows_{n}"
    fr.facts.createOrReplaceTempView(views[0])
    fr.replicas.createOrReplaceTempView(views[1])
    halves = [GROUPS[i::HALVES] for i in range(HALVES)]
    tasks: list[Callable[[], Judged]] = [partial(_checkers, spark, views, h) for h in halves]
    tasks.append(partial(_cycles, fr, runs))
    try:
        parts = run_all(tasks, "check-job", on_interrupt=partial(cancel, spark))
    finally:
        _drop_views(spark, *views)
    out = Judged()
    for p in parts:
        out.merge(p.found)
        out.crashed.extend(p.crashed)
        out.warnings.extend(p.warnings)
    for run, types in out.found.items():
        per_key = types.pop(PER_KEY, None)
        if per_key is not None and "unseen" in types:
            types["unseen"]["per_key"] = {str(e["key"]): int(e["count"]) for e in per_key["examples"]}
        out.found[run] = {k: types[k] for k in sorted(types, key=CHECKERS.index)}
    out.crashed = sorted(set(out.crashed))
    return out


def cancel(spark: Any) -> None:
    """Ask Spark to stop every job this process started (a stop signal came): in this process's own
    driver, or this client's operations on the shared check server, which never saw the signal."""
    from results.spark import is_remote

    if is_remote(spark):
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


def _split(table: pa.Table, column: str) -> dict[int, dict[str, Any]]:
    """A table's columns as numpy arrays, one dict per value of `column`."""
    import numpy as np

    if table.num_rows == 0:
        return {}
    cols = {name: table.column(name).to_numpy() for name in table.column_names}
    key = cols[column]
    out = {}
    for v in np.unique(key).tolist():
        m = key == v
        out[int(v)] = {name: c[m] for name, c in cols.items()}
    return out


def mop_ops(columns: ColumnFiles) -> Any:
    """The send/poll/txn completions of one history (its ops table): what the real-time order needs."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from results.cycles import Ops

    t = pq.read_table(columns.ops, columns=["index", "invoke", "f", "type"])
    t = t.filter(pc.is_in(t.column("f"), pa.array(["send", "poll", "txn"])))
    return Ops(t.column("index").to_numpy(), t.column("invoke").to_numpy(),
               np.asarray(pc.equal(t.column("type"), "ok").to_numpy(zero_copy_only=False), dtype=bool))
