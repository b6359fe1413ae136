"""The columns the reader's pass writes for the Spark job: one row per fact, exactly as documented."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kernel.history import HistoryWriter, OpType, read_ops
from kernel.history import columns as columns_mod
from kernel.history.columns import ColumnWriter


def _write(path: Path) -> None:
    ticks = iter(range(0, 1000, 10))  # time = 10 x index, so a latency is 10 x the lines between
    with HistoryWriter(path, clock=lambda: next(ticks)) as h:
        h.append(0, OpType.INVOKE, "assign", [1, 2])  # 0
        h.append(0, OpType.OK, "assign", [1, 2])  # 1
        h.append(0, OpType.INVOKE, "txn", [["send", 1, 10], ["poll"], ["send", 2, 20]])  # 2
        h.append("nemesis", OpType.INFO, "start-kill", {"kind": "one"}, fault=0)  # 3
        h.append(0, OpType.OK, "txn", [["send", 1, [5, 10]], ["poll", {"1": [[4, 9], [5, 10]], "2": []}],
                                       ["send", 2, [None, 20]]],
                 **{"rebalance-log": [{"revoked": [2], "assigned": []}]})  # 4
        h.append(1, OpType.INVOKE, "send", [["send", 3, 30]])  # 5
        h.append(1, OpType.FAIL, "send", [["send", 3, 30]])  # 6
        h.append(2, OpType.INVOKE, "send", [["send", 4, 40]], final=True)  # 7, never completed


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = pq.read_table(path).to_pylist()
    return sorted(rows, key=lambda r: (r.get("index") or 0, r.get("kind") or "", r.get("key") or 0, r.get("pos") or 0))


def test_every_fact_of_every_kind_becomes_one_row(tmp_path: Path) -> None:
    hist = tmp_path / "history.jsonl"
    _write(hist)
    w = ColumnWriter(tmp_path, run=3)
    for op in read_ops(hist):
        w.add(op)
    files = w.close()
    got = [(r["run"], r["key"], r["kind"], r["process"], r["index"], r["type"], r["pos"], r["offset"], r["value"],
            r["final"], r["rebalanced"], r["n_assign"]) for r in _rows(files.facts)]
    assert got == [
        (3, 1, "keep", "0", 1, "ok", None, None, None, False, False, None),
        (3, 2, "keep", "0", 1, "ok", None, None, None, False, False, None),
        (3, 1, "poll", "0", 4, "ok", 0, 4, 9, False, False, 1),
        (3, 1, "poll", "0", 4, "ok", 1, 5, 10, False, False, 1),
        (3, 2, "reset", "0", 4, "ok", None, None, None, False, False, None),
        (3, 1, "send", "0", 4, "ok", 0, 5, 10, False, False, 1),
        (3, 2, "send", "0", 4, "ok", 2, None, 20, False, False, 1),  # acknowledged without an offset
        (3, 3, "send", "1", 6, "fail", 0, None, 30, False, False, 0),
        (3, 4, "send", "2", 7, "info", 0, None, 40, True, False, 0),  # the invoke that never completed
    ]
    ops = sorted(pq.read_table(files.ops).to_pylist(), key=lambda r: r["index"])
    assert [(r["index"], r["process"], r["type"], r["latency"]) for r in ops] == [
        (1, "0", "ok", 10), (3, "nemesis", "info", None), (4, "0", "ok", 20), (6, "1", "fail", 10)]
    assert ops[1]["value"] == '{"kind":"one"}' and ops[1]["fault"] == "0"


def test_a_long_history_is_written_in_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns_mod, "CHUNK", 7)
    hist = tmp_path / "history.jsonl"
    with HistoryWriter(hist) as h:
        for i in range(50):
            h.append(0, OpType.INVOKE, "send", [["send", i % 3, i]])
            h.append(0, OpType.OK, "send", [["send", i % 3, [i // 3, i]]])
    w = ColumnWriter(tmp_path, run=0)
    for op in read_ops(hist):
        w.add(op)
    files = w.close()
    meta = pq.ParquetFile(files.facts).metadata
    assert meta.num_row_groups > 1 and meta.num_rows == 50
    assert sorted(r["value"] for r in pq.read_table(files.facts).to_pylist()) == list(range(50))
