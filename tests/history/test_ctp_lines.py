"""The consume-transform-produce fields of a history (kernel/history/README.md, "Exactly-once"): a ctp
transaction's completion may send what its invoke did not, each send naming its input record; every
other misuse of the fields is refused with its line and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernel.errors import HistoryError
from kernel.history import (
    ctp_sources,
    fenced,
    group_offsets,
    is_ctp,
    read_ops,
    scan,
    txn_offsets,
    writes,
)

INVOKE: dict[str, Any] = {"process": 1, "type": "invoke", "f": "txn", "value": [["poll"]], "ctp": True}
DONE: dict[str, Any] = {"process": 1, "type": "ok", "f": "txn", "ctp": True,
                        "value": [["poll", {"0": [[0, 1], [1, 2]]}], ["send", 1, [0, 101]], ["send", 1, [1, 102]]],
                        "sources": [[0, 0], [0, 1]], "offsets": {"0": 2}, "commits": {"0": 2}}


def _write(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps({"index": i, "time": i, **d}) + "\n" for i, d in enumerate(lines)))
    return path


def test_a_ctp_transaction_and_a_drain_with_the_groups_offsets_read_back(tmp_path: Path) -> None:
    fenced_done = {**DONE, "type": "fail", "fenced": True, "value": [["poll", {"0": [[2, 3]]}], ["send", 1, 103]],
                   "sources": [[0, 2]], "offsets": {"0": 3}}
    fenced_done.pop("commits")
    drain = [{"process": 9, "type": "invoke", "f": "poll", "value": [["poll"]], "final": True},
             {"process": 9, "type": "ok", "f": "poll", "value": [["poll", {}]], "final": True,
              "group-offsets": {"0": 2}}]
    path = _write(tmp_path, [INVOKE, DONE, INVOKE, fenced_done, *drain])
    ops = list(read_ops(path))
    assert scan(path).ctp_ops == 2
    assert is_ctp(ops[0]) and is_ctp(ops[1]) and not is_ctp(ops[4])
    assert [w.value for w in writes(ops[1])] == [101, 102] and ctp_sources(ops[1]) == [(0, 0), (0, 1)]
    assert txn_offsets(ops[1]) == {0: 2} and txn_offsets(ops[3]) == {0: 3}, "offsets whatever the outcome"
    assert fenced(ops[3]) and not fenced(ops[1])
    assert group_offsets(ops[5]) == {0: 2} and group_offsets(ops[1]) == {}


@pytest.mark.parametrize(("invoke", "done", "why"), [
    ({**INVOKE, "value": [["poll"], ["send", 1, 5]]}, None, "a ctp invoke holds polls only"),
    ({**INVOKE, "ctp": 1}, None, "ctp must be true, on a txn op only"),
    ({**INVOKE, "f": "poll"}, None, "ctp must be true, on a txn op only"),
    ({**INVOKE, "offsets": {"0": 1}}, None, "an invoke carries no sources, offsets, fenced or group-offsets"),
    (INVOKE, {**DONE, "sources": [[0, 0]]}, "sources names 1 input records for 2 sends"),
    (INVOKE, {**DONE, "sources": [[0, -1], [0, 1]]}, "sources\\[0\\] offset -1 is out of range"),
    (INVOKE, {**DONE, "sources": {"0": 0}}, "sources must be a list of \\[key, offset\\]"),
    (INVOKE, {**DONE, "offsets": {"x": 2}}, "offsets has key 'x', which is not a key number"),
    (INVOKE, {**DONE, "fenced": "yes"}, "fenced must be true or false"),
    (INVOKE, {k: v for k, v in DONE.items() if k != "sources"},
     "a ctp completion that sends must name each send's input record"),
    (INVOKE, {k: v for k, v in DONE.items() if k not in ("ctp", "sources", "offsets")},
     "completes a ctp invoke \\(line 1\\) as a plain transaction"),
    ({k: v for k, v in INVOKE.items() if k != "ctp"}, DONE, "completes a plain invoke \\(line 1\\) as a ctp"),
    ({**INVOKE, "ctp": False}, None, "ctp must be true"),
    (INVOKE, {**DONE, "fenced": True}, "fenced must be true or false, and true only on a fail completion"),
    (INVOKE, {**DONE, "group-offsets": {"0": 2}}, "group-offsets belongs on a final op"),
    ({"process": 1, "type": "invoke", "f": "crash", "value": None, "ctp": True}, None,
     "ctp must be true, on a txn op only"),
    ({"process": 1, "type": "invoke", "f": "crash", "value": None},
     {"process": 1, "type": "info", "f": "crash", "value": None, "sources": [[0]]},
     "sources, offsets and fenced belong to a ctp transaction"),
    ({"process": 1, "type": "invoke", "f": "txn", "value": [["send", 0, 1]]},
     {"process": 1, "type": "ok", "f": "txn", "value": [["send", 0, [0, 1]]], "sources": [[0, 0]]},
     "sources, offsets and fenced belong to a ctp transaction"),
])
def test_a_misused_ctp_field_is_refused_with_its_line(tmp_path: Path, invoke: dict[str, Any],
                                                     done: dict[str, Any] | None, why: str) -> None:
    lines = [invoke] if done is None else [invoke, done]
    with pytest.raises(HistoryError, match=f"line {len(lines)}: {why}"):
        scan(_write(tmp_path, lines))
