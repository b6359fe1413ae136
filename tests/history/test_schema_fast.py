"""The reader's fast path accepts only what the field-by-field check accepts, and gives the same op.

`schema._fast_line` tests the common line shapes with bulk C-level tests; anything it is unsure of
goes to `schema.checked_line`, which names the problem. A fast path that accepted a bad line would
let the checks judge a malformed history, so every corpus line and random mutations of them (a
number's type or range changed, a field removed or added, a list cut or lengthened) are tried both
ways.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.history.schema import INT64_MAX, KEY_MAX, LineProblem, _fast_line, checked_line

CORPUS = Path(__file__).resolve().parents[1] / "checks" / "corpus"
LINES = [json.loads(line) for f in sorted(CORPUS.glob("*/history.jsonl"))
         for line in f.read_text().splitlines() if line.strip()]
ODD = [None, True, False, 0, -1, 1.0, 1.5, "1", "", [], {}, [1, 2], {"0": []}, INT64_MAX + 1, -(2**63) - 1,
       KEY_MAX + 1, 2**64, "send", "poll", ["send", 1, 2], [[0, 1]]]


def _paths(x: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(x, dict):
        out += [p for k, v in x.items() for p in _paths(v, (*path, k))]
    elif isinstance(x, list):
        out += [p for i, v in enumerate(x) for p in _paths(v, (*path, i))]
    return out


def _agree(d: Any) -> None:
    fast = _fast_line(d)
    try:
        slow = checked_line(d)
    except LineProblem as e:
        assert fast is None, f"the fast path accepted a line the full check refuses ({e}): {d!r}"
        return
    assert fast is None or repr(fast) == repr(slow), (fast, slow)  # repr: True and 1 differ there


def test_every_corpus_line_the_same_both_ways() -> None:
    assert len(LINES) > 300
    taken = 0
    for d in LINES:
        _agree(d)
        taken += _fast_line(d) is not None
    assert taken > len(LINES) // 2, "the fast path should take most of a real history"


@settings(max_examples=3000, deadline=None)
@given(line=st.sampled_from(LINES), data=st.data())
def test_mutated_lines_are_never_accepted_by_the_fast_path_alone(line: Any, data: st.DataObject) -> None:
    d = copy.deepcopy(line)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(d)
        path = data.draw(st.sampled_from(paths))
        how = data.draw(st.sampled_from(["set", "drop", "append", "extra"]))
        if not path:
            d = copy.deepcopy(data.draw(st.sampled_from(ODD))) if how == "set" else d
            continue
        parent = d
        for k in path[:-1]:
            parent = parent[k]
        last = path[-1]
        if how == "set":
            parent[last] = copy.deepcopy(data.draw(st.sampled_from(ODD)))
        elif how == "drop":
            del parent[last]
        elif how == "append" and isinstance(parent[last], list):
            parent[last].append(copy.deepcopy(data.draw(st.sampled_from(ODD))))
        elif how == "extra" and isinstance(parent, dict):
            parent[data.draw(st.sampled_from(["final", "error", "x", "01", "7"]))] = copy.deepcopy(
                data.draw(st.sampled_from(ODD)))
    _agree(d)
