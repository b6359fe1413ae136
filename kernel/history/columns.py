"""The history as typed columns: what the checks' Spark job reads, written in the strict reader's pass.

Spark is here for scale, but parsing our JSON inside Spark cost more than every check after it (at
10^6 ops, 13 of 37 warm seconds): a `value` mixes types (`["send", k, [offset, v]]`,
`["poll", {"k": [[o, v], ...]}]`), which no Spark schema holds, so each line was parsed three times
over (the op, its micro-ops as strings, each part) — and the strict reader (`reader.py`) had already
decoded and validated every line in Python. So the one pass of the one reader now also writes what
the checks need, as Parquet with declared types, in bounded chunks (memory does not grow with the
history), and Spark starts from typed rows:

- `FACTS` (`facts-RUN.parquet`): one row per fact about a key, `kind` saying which —
  `send` (a send micro-op of a completion, any type: its value, the offset its completion gives or
  null, `pos` in its op; an invoke that never completed counts as an `info` send), `poll` (a record
  a completion's polls returned, whatever the completion's type: offset, value, `pos` among the op's
  records of that key, `rebalanced` when the poll's rebalance log names the key), `keep` (an ok or
  info assign/subscribe names the key), `reset` (an ok or info completion's rebalance log names the
  key). `n_assign` of a send or poll: how many assign/subscribe ops its process had completed (ok or
  info) by then; `final`: the op belongs to the final drain; `invoke` of a poll record: its op's
  invoke index (what tells the cycle search that a read came after its write completed). `index` is
  the completion's (the invoke's for one that never completed). `results.frames` builds the keyed table from these rows.
- `OPS` (`ops-RUN.parquet`): one row per client completion paired with its invoke (its time,
  latency and the invoke's index, which the real-time order of the cycle check needs) and per
  nemesis op (its value and fault as JSON text), for the perf facts.

`run` is the history's position in the batch being checked, so many histories are one table.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from kernel.history.op import KEY_FS, NEMESIS, Op, OpType, rebalanced_keys
from kernel.history.schema import send_value

FACTS = pa.schema([
    ("run", pa.int32()), ("key", pa.int64()), ("kind", pa.string()), ("process", pa.string()),
    ("index", pa.int64()), ("type", pa.string()), ("pos", pa.int32()), ("offset", pa.int64()),
    ("value", pa.int64()), ("final", pa.bool_()), ("rebalanced", pa.bool_()), ("n_assign", pa.int64()),
    ("invoke", pa.int64()),
])
OPS = pa.schema([
    ("run", pa.int32()), ("index", pa.int64()), ("time", pa.int64()), ("latency", pa.int64()),
    ("f", pa.string()), ("type", pa.string()), ("process", pa.string()), ("value", pa.string()),
    ("fault", pa.string()), ("invoke", pa.int64()),
])
#: rows buffered before a row group is written (bounds the reader's memory on any history)
CHUNK = 1 << 18
_OK, _INFO = OpType.OK, OpType.INFO
_SEND_FS = frozenset({"send", "txn"})
_MOP_FS = frozenset({"send", "poll", "txn"})
_encode = msgspec.json.encode


@dataclass(frozen=True)
class ColumnFiles:
    """The two Parquet files of one history."""

    facts: Path
    ops: Path
    info_sends: int = 0  # send micro-ops of info completions (or never completed): none, no proof to look for
    rows: int = 0  # rows of the facts table (how much work the Spark job has, better than the file's bytes)


class _Table:
    """Rows of one schema, buffered column by column (a poll's records are added with C-speed list
    operations, not one Python call per record) and written a row group at a time."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self.schema = schema
        self.rows: list[tuple[Any, ...]] = []  # single rows, as tuples (one append each)
        self.cols: list[list[Any]] = [[] for _ in schema]  # bulk rows, column by column
        strings = [f.name for f in schema if f.type == pa.string()]
        self.writer = pq.ParquetWriter(path, schema, use_dictionary=strings, compression="none")
        self.written = 0

    def __len__(self) -> int:
        return len(self.rows) + len(self.cols[0])

    def flush(self) -> None:
        if not len(self):
            return
        singles = list(zip(*self.rows, strict=True)) if self.rows else [()] * len(self.cols)
        arrays = [pa.array(c + list(r), type=f.type) for c, r, f in zip(self.cols, singles, self.schema, strict=True)]
        self.written += len(arrays[0])
        self.rows = []
        self.cols = [[] for _ in self.schema]
        self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _text(x: Any) -> str | None:
    """A JSON value as Spark's from_json reads it into a string field: a string as itself, anything
    else as its JSON text."""
    if x is None or isinstance(x, str):
        return x
    return _encode(x).decode()


class ColumnWriter:
    """Receives a history's ops in file order (as `read_ops` yields them, already validated) and
    writes its two tables. `close()` adds the invokes that never completed and finishes the files."""

    def __init__(self, dest: Path, run: int) -> None:
        self.run = run
        self.files = ColumnFiles(dest / f"facts-{run}.parquet", dest / f"ops-{run}.parquet")
        self._facts = _Table(self.files.facts, FACTS)
        try:
            self._ops = _Table(self.files.ops, OPS)
        except BaseException:
            self._facts.writer.close()
            raise
        self._open: dict[Any, Op] = {}
        self._n_assign: dict[Any, int] = {}
        self.info_sends = 0

    def add(self, op: Op) -> None:
        proc = op.process
        if proc == NEMESIS:
            self._ops.rows.append((self.run, op.index, op.time, None, op.f, op.type.value, NEMESIS, _text(op.value),
                                   _text(op.extra.get("fault")), None))
            self._maybe_flush()
            return
        if op.type is OpType.INVOKE:
            self._open[proc] = op
            return
        inv = self._open.pop(proc, None)
        if inv is None:  # the strict reader refuses this; a caller feeding other ops gets no row
            return
        n = self._n_assign.get(proc, 0)
        if op.f in KEY_FS and (op.type is _OK or op.type is _INFO):
            n += 1
            self._n_assign[proc] = n
        self._ops.rows.append((self.run, op.index, op.time, op.time - inv.time, op.f, op.type.value, str(proc), None,
                               None, inv.index))
        self._completion(inv, op, n)
        self._maybe_flush()

    def _completion(self, inv: Op, op: Op, n_assign: int) -> None:
        run, proc, index, typ, f = self.run, str(op.process), op.index, op.type, op.f
        t = typ.value
        final = op.extra.get("final") is True
        rows = self._facts.rows
        rb = rebalanced_keys(op) if typ is _OK or typ is _INFO else set()
        for k in rb:
            rows.append((run, k, "reset", proc, index, t, None, None, None, False, False, None, None))
        if f in _MOP_FS:
            seen: dict[int, int] = {}  # key -> records of it so far in this op (a txn may poll a key twice)
            for pos, m in enumerate(op.value):
                if m[0] == "send":
                    arg = m[2]
                    offset, value = (arg[0], arg[1]) if type(arg) is list else (None, arg)
                    rows.append((run, m[1], "send", proc, index, t, pos, offset, value, final, False, n_assign,
                                 None))
                    if typ is _INFO:
                        self.info_sends += 1
                elif len(m) > 1 and m[1]:
                    for k, pairs in m[1].items():
                        if pairs:
                            key = int(k)
                            start = seen.get(key, 0)
                            self._records(key, pairs, start, (run, proc, index, t, final, n_assign, inv.index),
                                          rb)
                            seen[key] = start + len(pairs)
        elif f in KEY_FS and (typ is _OK or typ is _INFO):
            for k in op.value:
                rows.append((run, k, "keep", proc, index, t, None, None, None, False, False, None, None))

    def _records(self, key: int, pairs: list[list[int]], start: int, op: tuple[Any, ...], rb: set[int]) -> None:
        """One poll's records of one key (`start`: the op's records of that key before them): every
        column extended at once."""
        run, proc, index, t, final, n_assign, invoked = op
        n = len(pairs)
        c = self._facts.cols
        offsets, values = zip(*pairs, strict=True)
        c[0] += [run] * n
        c[1] += [key] * n
        c[2] += ["poll"] * n
        c[3] += [proc] * n
        c[4] += [index] * n
        c[5] += [t] * n
        c[6] += range(start, start + n)
        c[7] += offsets
        c[8] += values
        c[9] += [final] * n
        c[10] += [key in rb] * n
        c[11] += [n_assign] * n
        c[12] += [invoked] * n

    def _maybe_flush(self) -> None:
        if len(self._facts) >= CHUNK:
            self._facts.flush()
        if len(self._ops) >= CHUNK:
            self._ops.flush()

    def close(self) -> ColumnFiles:
        """Invokes that never completed are `info` sends (their offsets unknown); then the files."""
        for inv in sorted(self._open.values(), key=lambda o: o.index):
            if inv.f not in _SEND_FS:
                continue
            proc = str(inv.process)
            for pos, m in enumerate(inv.value):
                if m[0] == "send":
                    self.info_sends += 1
                    self._facts.rows.append((self.run, m[1], "send", proc, inv.index, "info", pos, None,
                                             send_value(m), inv.extra.get("final") is True, False,
                                             self._n_assign.get(inv.process, 0), None))
        self._open.clear()
        self._facts.close()
        self._ops.close()
        return ColumnFiles(self.files.facts, self.files.ops, self.info_sends, self._facts.written)

    def abort(self) -> None:
        """Close and delete the files after a failed pass (their content is not to be used)."""
        for t in (self._facts, self._ops):
            with contextlib.suppress(Exception):  # best effort on the way out of an error
                t.writer.close()
            t.path.unlink(missing_ok=True)
