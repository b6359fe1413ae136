"""A malformed history never flips a verdict.

Random mutations of real corpus histories — a field removed, a value's type changed, a number pushed
out of range, a line cut — either get the bad line reported (a HistoryError, exit 2: "the history
cannot be judged") or, where the mutation is harmless (an optional field gone, a nemesis op's value
changed), the check gives the original verdict. Never a different verdict.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.errors import HistoryError
from kernel.history import scan
from results.check import check_run

CORPUS = Path(__file__).resolve().parents[1] / "checks" / "corpus"
#: one valid history and ones whose verdict is invalid for different reasons
CASES = ["valid-basic", "lost-write", "G1a", "nonmonotonic-poll", "unseen"]
pytestmark = pytest.mark.spark

_verdicts: dict[str, Any] = {}


def _verdict(run: Path) -> tuple[Any, list[str]]:
    r = check_run(run, spark_master="local[2]", perf=False, write=False)
    return r.valid, r.bad_error_types


def _original(case: str, tmp: Path) -> tuple[Any, list[str]]:
    if case not in _verdicts:
        d = tmp / f"orig-{case}"
        shutil.copytree(CORPUS / case, d)
        _verdicts[case] = _verdict(d)
    return _verdicts[case]  # type: ignore[no-any-return]


def _leaves(x: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every scalar inside a JSON value."""
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _leaves(v, (*path, k))]
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in _leaves(v, (*path, i))]
    return [path]


def _set(x: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        x = x[k]
    x[path[-1]] = value


def _get(x: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        x = x[k]
    return x


#: type changes and numbers outside a signed 64-bit long (a different in-range value is not a
#: malformation but a different history, and may rightly change the verdict)
REPLACEMENTS = [lambda v: str(v), lambda v: float(v) + 0.5 if isinstance(v, int | float) and not isinstance(v, bool)
                else 1.5, lambda v: [v], lambda v: {"v": v}, lambda v: None, lambda v: True,
                lambda v: 10**30, lambda v: -(10**30)]


@st.composite
def mutation(draw: st.DrawFn) -> tuple[str, str, str]:
    """(case, mutated text, description)."""
    case = draw(st.sampled_from(CASES))
    lines = (CORPUS / case / "history.jsonl").read_text().splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    op = json.loads(lines[i])
    kind = draw(st.sampled_from(["remove", "retype", "cut"]))
    if kind == "cut":
        at = draw(st.integers(1, max(1, len(lines[i]) - 1)))
        lines[i] = lines[i][:at]
        return case, "\n".join(lines) + "\n", f"line {i + 1} cut at {at}"
    if kind == "remove":
        key = draw(st.sampled_from(sorted(op)))
        del op[key]
        lines[i] = json.dumps(op)
        return case, "\n".join(lines) + "\n", f"line {i + 1} lost {key}"
    leaves = [p for p in _leaves(op) if p]
    path = draw(st.sampled_from(leaves))
    new = draw(st.sampled_from(REPLACEMENTS))(_get(op, path))
    _set(op, path, new)
    lines[i] = json.dumps(op)
    return case, "\n".join(lines) + "\n", f"line {i + 1} {'.'.join(map(str, path))} -> {new!r}"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=mutation())
def test_a_mutation_is_reported_or_harmless_never_a_flipped_verdict(m: tuple[str, str, str],
                                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    case, text, what = m
    tmp = tmp_path_factory.mktemp("mut")
    original = _original(case, tmp)
    run = tmp / "run"
    shutil.copytree(CORPUS / case, run)
    (run / "history.jsonl").write_text(text)
    try:
        facts = scan(run / "history.jsonl")
    except HistoryError as e:
        assert "line" in str(e) and "cannot be judged" in str(e), (what, str(e))
        return
    if facts.incomplete:  # a cut last line: the run looks crashed, so at best unknown, never a pass
        got = _verdict(run)[0]
        assert got == "unknown" if original[0] is True else got in (False, "unknown"), (what, got)
        return
    assert _verdict(run) == original, f"{what}: the verdict changed from {original}"
