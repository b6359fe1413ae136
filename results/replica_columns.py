"""The replica dumps as typed columns: each node's committed records, one Parquet file per run, in
the keyed table's own row shape (`kernel.history.columns.FACTS` and `epoch`).

Why here and not in the JVM: Spark parsed the dumps' JSON itself, tagged each line with its file
and found each file's high watermark with a window over the file — a shuffle and a JSON parse on
the check's critical path, nearly half of a warm table build for a `make run`
(docs/measurements/check.md, "2026-11-30: side by side, and the dumps read by Arrow").
Arrow's JSON reader parses the same files in C++ in a small fraction of that time, in the same pass
that writes the history's columns (`results.check._prepare`), and Spark then reads one Parquet file
per run as it reads the history's.

A dump file is `replicas/<node>/<topic>-<partition>.jsonl` (cluster-impl's dump format): a header
line with the replica's `hw` (and `leo`), then one line per record (`offset`, `epoch`, `value`).
A record is *committed* when its offset is below the file's high watermark; only those count (the
divergence check compares committed data). A value that is not an integer (nothing our producers
write) is kept as null, as Spark's cast made it; a line that is not JSON is skipped, as Spark's
permissive reader did — the dumps are evidence, not input a user wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from kernel.errors import EnvironmentProblem
from kernel.history.columns import FACTS

#: the keyed table's input rows of a replica dump: a fact row (kind `replica`, process = the node)
#: and the record's leader epoch
REPLICA_FACTS = FACTS.append(pa.field("epoch", pa.int64()))
#: the fields of a dump line that matter; the header's other fields (leader_epochs...) are skipped
_LINE = pa.schema([("offset", pa.int64()), ("epoch", pa.int64()), ("value", pa.string()), ("hw", pa.int64())])


@dataclass(frozen=True)
class Dump:
    """One dump file and what its path says: the node that held it and the partition (the key)."""

    path: Path
    node: str
    key: int


def dumps(replicas: Path | None) -> list[Dump]:
    """Every `<node>/<topic>-<partition>.jsonl` under a run's `replicas/` directory, in path order."""
    if replicas is None or not replicas.is_dir():
        return []
    out = []
    for f in sorted(replicas.glob("*/*.jsonl")):
        stem, _, part = f.stem.rpartition("-")
        if stem and part.isdigit():
            out.append(Dump(f, f.parent.name, int(part)))
    return out


def _lines(path: Path) -> pa.Table:
    """A dump's lines as `_LINE` columns: Arrow's reader, or line by line where it refuses the file
    (a truncated line, a value of another JSON type)."""
    if path.stat().st_size == 0:
        return _LINE.empty_table()
    try:
        opts = pj.ParseOptions(explicit_schema=_LINE, unexpected_field_behavior="ignore")
        return pj.read_json(path, parse_options=opts)
    except pa.ArrowInvalid:
        return _lines_slowly(path)


def _lines_slowly(path: Path) -> pa.Table:
    cols: dict[str, list[Any]] = {f.name: [] for f in _LINE}
    with path.open("rb") as fh:
        for raw in fh:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict):
                continue
            for name in ("offset", "epoch", "hw"):
                v = line.get(name)
                cols[name].append(v if isinstance(v, int) and not isinstance(v, bool) else None)
            v = line.get("value")
            cols["value"].append(v if v is None or isinstance(v, str) else json.dumps(v))
    return pa.table(cols, schema=_LINE)


def _as_long(values: pa.ChunkedArray) -> pa.Array:
    """Decimal text to int64, anything else null (Spark's `CAST(value AS BIGINT)` of a dump value)."""
    try:
        return pc.cast(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for v in values.to_pylist():
            try:
                out.append(int(v.strip()) if v is not None else None)
            except ValueError:
                out.append(None)
        return pa.array(out, pa.int64())


def committed(dump: Dump, run: int) -> pa.Table:
    """The dump's committed records (offset below the file's highest `hw`) as `REPLICA_FACTS` rows."""
    t = _lines(dump.path)
    hw = pc.max(t.column("hw")).as_py()
    if hw is None:
        return REPLICA_FACTS.empty_table()
    t = t.filter(pc.less(t.column("offset"), hw))  # a null offset (the header) is dropped too
    n = t.num_rows

    def const(value: Any, field: str) -> pa.Array:
        return pa.nulls(n, REPLICA_FACTS.field(field).type) if value is None else \
            pa.array([value] * n, REPLICA_FACTS.field(field).type)

    cols = {
        "run": const(run, "run"), "key": const(dump.key, "key"), "kind": const("replica", "kind"),
        "process": const(dump.node, "process"), "index": const(None, "index"), "type": const(None, "type"),
        "pos": const(None, "pos"), "offset": t.column("offset"), "value": _as_long(t.column("value")),
        "final": const(False, "final"), "rebalanced": const(False, "rebalanced"),
        "n_assign": const(None, "n_assign"), "invoke": const(None, "invoke"), "epoch": t.column("epoch"),
    }
    return pa.table([cols[f.name] for f in REPLICA_FACTS], schema=REPLICA_FACTS)


def write_replica_facts(replicas: Path | None, run: int, dest: Path) -> Path | None:
    """Every committed record of a run's dumps in one Parquet file `dest` (None: the run has no dumps)."""
    found = dumps(replicas)
    if not found:
        return None
    tables = []
    for d in found:
        try:
            tables.append(committed(d, run))
        except OSError as e:  # the writing's own errors (a full work directory) are the caller's to word
            raise EnvironmentProblem(f"cannot read the replica dump {d.path} ({e.strerror or e}); "
                                     "nothing was judged") from None
    table = pa.concat_tables(tables)
    pq.write_table(table, dest, compression="none")
    return dest
