"""The one reader: ops, pairs, writes and reads of a history, and what a crashed run leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.errors import HistoryError
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


CORPUS = Path(__file__).resolve().parents[1] / "checks" / "corpus"


def _lines(tmp_path: Path, ops: list[tuple[object, str, str, object]]) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps({"index": i, "time": i, "process": p, "type": t, "f": f, "value": v}) + "\n"
                            for i, (p, t, f, v) in enumerate(ops)))
    return path


def test_every_shape_jepsens_kafka_model_writes_is_read(tmp_path: Path) -> None:
    """The three forms of an acknowledged send (offset, no offset, null offset), on ok, info and fail
    completions alike; polls carried by info and fail completions; a completion with more polls than
    its invoke; an ok poll without a result; a txn mixing both; the crash and debug ops of Jepsen's
    final polls."""
    ops: list[tuple[object, str, str, object]] = [
        (0, "invoke", "send", [["send", 0, 1], ["send", 0, 2], ["send", 1, 3]]),
        (0, "ok", "send", [["send", 0, [0, 1]], ["send", 0, 2], ["send", 1, [None, 3]]]),
        (1, "invoke", "txn", [["send", 0, 4], ["poll"]]),
        (1, "info", "txn", [["send", 0, [5, 4]], ["poll", {"1": [[0, 3]]}]]),
        (2, "invoke", "txn", [["poll"], ["send", 1, 5]]),
        (2, "fail", "txn", [["poll", {"0": [[0, 1], [1, 2]]}], ["poll", {"0": [[2, 9]]}], ["send", 1, [1, 5]]]),
        (3, "invoke", "poll", [["poll"]]),
        (3, "ok", "poll", [["poll"]]),
        (4, "invoke", "crash", None),
        (4, "info", "crash", None),
        (5, "invoke", "debug-topic-partitions", [0, 1]),
        (5, "ok", "debug-topic-partitions", {"0": {"leader": 1}}),
    ]
    ops_read = list(read_ops(_lines(tmp_path, ops)))
    assert len(ops_read) == len(ops)
    assert writes(ops_read[1]) == [Write(0, 1, 0, 0), Write(0, 2, None, 1), Write(1, 3, None, 2)]
    assert writes(ops_read[3]) == [Write(0, 4, 5, 0)], "an info completion's offset is read; the checks decide"
    assert list(reads(ops_read[3])) == [Read(1, 0, 3, 0)], "an info transaction's reads are read"
    assert list(reads(ops_read[5])) == [Read(0, 0, 1, 0), Read(0, 1, 2, 1), Read(0, 2, 9, 2)], \
        "one key's records across two polls of one op: positions run on"
    assert list(reads(ops_read[7])) == []


def test_every_transcribed_jepsen_case_is_read() -> None:
    cases = sorted(CORPUS.glob("jepsen-*/history.jsonl"))
    assert len(cases) >= 38
    for path in cases:
        assert scan(path).client_ops > 0 or "empty" in path.parent.name


@pytest.mark.parametrize(("invoke", "done", "why"), [
    ([["send", 0, 1], ["poll"]], [["send", 0, [0, 1]], ["poll", {}], ["send", 1, [0, 5]]],
     "value\\[2\\] sends 5 to key 1, which its invoke \\(line 1\\) did not send"),
    ([["send", 0, 1], ["send", 0, 2]], [["send", 0, [0, 2]], ["send", 0, [1, 1]]],
     "value\\[0\\] sends 2 to key 0 out of the order of its invoke"),
    ([["send", 0, 1], ["send", 1, 2]], [["send", 0, 1]], "completes without the send of 2 to key 1"),
    ([["poll"]], [["poll", {"0": [[0, 1]]}], ["send", 0, 1]], "value\\[1\\] is a 'send' micro-op inside a 'poll' op"),
    ([["send", 0, 1], ["append", 0, 2]], None, "value\\[1\\] is an unknown micro-op 'append'"),
    ([["poll", {"0": [[0, 1]]}]], None, "value\\[0\\] of an invoke must be \\['poll'\\]"),
    ([["send", 0, 1]], [["send", 0, [1.5, 1]]], "value\\[0\\] offset must be an integer, not 1.5"),
])
def test_what_jepsens_model_cannot_produce_is_refused_with_its_line(
        tmp_path: Path, invoke: list[object], done: list[object] | None, why: str) -> None:
    f = "poll" if all(m[0] == "poll" for m in invoke) and invoke[0] == ["poll"] else "txn"
    ops: list[tuple[object, str, str, object]] = [(0, "invoke", f, invoke)]
    if done is not None:
        ops.append((0, "ok", f, done))
    with pytest.raises(HistoryError, match=f"line {len(ops)}: {why}"):
        scan(_lines(tmp_path, ops))
