"""The replica dumps' reader (`results.replica_columns`): what counts as a committed record, and dumps
that are odd in the ways a crashed or interrupted node leaves them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kernel.errors import EnvironmentProblem
from results.replica_columns import REPLICA_FACTS, write_replica_facts


def _dump(path: Path, lines: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))


def _header(hw: int) -> dict[str, object]:
    return {"topic": "chaos", "partition": 0, "hw": hw, "leo": hw + 2, "log_start_offset": 0,
            "leader_epochs": [[0, 0], [3, 2]]}


def _rec(offset: int, value: object, epoch: int = 0) -> dict[str, object]:
    return {"offset": offset, "epoch": epoch, "value": value, "key": None, "crc": 0, "timestamp": 0}


def _rows(replicas: Path, run: int = 7) -> list[dict[str, object]]:
    out = write_replica_facts(replicas, run, replicas.parent / "out.parquet")
    if out is None:
        return []
    t = pq.read_table(out)
    assert t.schema == REPLICA_FACTS
    return t.to_pylist()


def test_only_records_below_the_high_watermark_count_tagged_with_node_key_and_run(tmp_path: Path) -> None:
    reps = tmp_path / "replicas"
    _dump(reps / "n1" / "chaos-2.jsonl", [_header(2), _rec(0, "10"), _rec(1, "11", 3), _rec(2, "12"), _rec(3, "13")])
    _dump(reps / "n2" / "chaos-0.jsonl", [_header(1), _rec(0, "20")])
    rows = _rows(reps)
    got = [(r["process"], r["key"], r["offset"], r["value"], r["epoch"]) for r in rows]
    assert got == [("n1", 2, 0, 10, 0), ("n1", 2, 1, 11, 3), ("n2", 0, 0, 20, 0)]
    assert all(r["run"] == 7 and r["kind"] == "replica" and r["index"] is None and r["final"] is False
               for r in rows)


def test_a_truncated_line_is_skipped_and_the_rest_of_the_dump_still_counts(tmp_path: Path) -> None:
    """A node killed while its dump was written leaves half a line; the records around it are evidence."""
    reps = tmp_path / "replicas"
    _dump(reps / "n1" / "chaos-0.jsonl", [_header(3), _rec(0, "1"), '{"offset": 1, "epo', _rec(2, "3")])
    assert [(r["offset"], r["value"]) for r in _rows(reps)] == [(0, 1), (2, 3)]


def test_a_value_that_is_no_integer_is_kept_as_null(tmp_path: Path) -> None:
    reps = tmp_path / "replicas"
    _dump(reps / "n1" / "chaos-0.jsonl", [_header(3), _rec(0, "1"), _rec(1, "x7"), _rec(2, 5)])
    assert [(r["offset"], r["value"]) for r in _rows(reps)] == [(0, 1), (1, None), (2, 5)]


def test_dumps_with_nothing_committed_give_no_rows(tmp_path: Path) -> None:
    reps = tmp_path / "replicas"
    _dump(reps / "n1" / "chaos-0.jsonl", [_header(0), _rec(0, "1")])  # hw 0: nothing committed
    _dump(reps / "n2" / "chaos-0.jsonl", [_rec(0, "1")])  # no header: no high watermark known
    (reps / "n3").mkdir()
    (reps / "n3" / "chaos-0.jsonl").write_text("")  # a node that died before writing
    _dump(reps / "n4" / "probes.jsonl", [_header(5), _rec(0, "1")])  # not a partition's dump
    assert _rows(reps) == []


def test_no_dump_directory_means_no_file(tmp_path: Path) -> None:
    assert write_replica_facts(None, 0, tmp_path / "x.parquet") is None
    assert write_replica_facts(tmp_path / "nowhere", 0, tmp_path / "x.parquet") is None
    assert not (tmp_path / "x.parquet").exists()


def test_a_dump_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    (tmp_path / "replicas" / "n1" / "chaos-0.jsonl").mkdir(parents=True)  # a directory where a file belongs
    with pytest.raises(EnvironmentProblem, match=r"cannot read the replica dump .*chaos-0\.jsonl"):
        write_replica_facts(tmp_path / "replicas", 0, tmp_path / "x.parquet")
