"""The one reader: ops, pairs, writes and reads of a history, and what a crashed run leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.history import HistoryWriter, OpType, Read, Write, pairs, read_ops, reads, scan, writes
from kernel.history.schema import LineProblem, check_line


def test_written_history_reads_back_through_the_accessors(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        h.append(0, OpType.INVOKE, "txn", [["send", 1, 10], ["send", 2, 20], ["poll"]])
        h.append("nemesis", OpType.INFO, "start-kill", {"kind": "one"}, fault=0)
        h.append(0, OpType.OK, "txn",
                 [["send", 1, [5, 10]], ["send", 2, [None, 20]], ["poll", {"1": [[4, 9], [5, 10]]}]])
        h.append(1, OpType.INVOKE, "send", [["send", 3, 30]])
        h.append(1, OpType.INFO, "send", [["send", 3, 30]], error="timed out")
        h.append(2, OpType.INVOKE, "assign", [1, 2], final=True)
    ops = list(read_ops(path))
    assert [o.index for o in ops] == list(range(6)) and ops[1].extra == {"fault": 0}
    got = list(pairs(ops))
    assert [(a.index, b.index if b else None) for a, b in got] == [(0, 2), (3, 4), (5, None)]
    assert writes(ops[2]) == [Write(1, 10, 5, 0), Write(2, 20, None, 1)]
    assert writes(ops[4]) == [Write(3, 30, None, 0)], "an info send has no known offset"
    assert list(reads(ops[2])) == [Read(1, 4, 9, 0), Read(1, 5, 10, 1)]
    facts = scan(path)
    assert (facts.ops, facts.client_ops, facts.nemesis_ops, facts.final_ops) == (6, 5, 1, 1)
    assert facts.pending == {"2": 6} and facts.incomplete
    assert facts.completions == {"ok": 1, "fail": 0, "info": 1}


def test_a_torn_last_line_is_remembered_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    good = {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll", "value": [["poll"]]}
    path.write_text(json.dumps(good) + "\n" + '{"index": 1, "time"')
    facts = scan(path)
    assert facts.truncated_tail and facts.incomplete and "line 2" in facts.warnings[0]


def test_the_writer_refuses_nan(tmp_path: Path) -> None:
    import pytest

    with HistoryWriter(tmp_path / "h.jsonl") as h, pytest.raises(ValueError):
        h.append(0, OpType.INVOKE, "send", [["send", 0, float("nan")]])


@pytest.mark.parametrize("bad", [["invoke"], {"t": 1}, 3, None])
def test_a_type_that_is_not_a_string_is_a_line_problem(bad: object) -> None:
    """Found by the mutation property: a list as `type` crashed the reader (unhashable) instead of
    being reported as the bad line."""
    with pytest.raises(LineProblem, match="type"):
        check_line({"index": 0, "time": 1, "process": 0, "type": bad, "f": "poll", "value": []})
