"""Property tests through the production Spark pipeline (few examples each: every check is a Spark job)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from results.check import check_run
from tests.checks.histgen import acked_values, correct_history

pytestmark = pytest.mark.spark
SETTINGS = settings(
    max_examples=6,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _check(tmp_path: Path, h: Any, name: str) -> Any:
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    h.write(d / "history.jsonl")
    return check_run(d, spark_master="local[2]", perf=False)


@SETTINGS
@given(seed=st.integers(0, 2**32))
def test_a_correct_log_is_always_valid(spark: Any, tmp_path: Path, seed: int) -> None:
    r = _check(tmp_path, correct_history(seed), f"valid-{seed}")
    assert r.valid is True, r.anomalies


@SETTINGS
@given(seed=st.integers(0, 2**32), pick=st.integers(0, 10_000))
def test_deleting_one_acked_value_from_later_reads_is_exactly_one_lost_write(
    spark: Any, tmp_path: Path, seed: int, pick: int
) -> None:
    h = correct_history(seed)
    # a value with a later acked value in the same key, so a higher offset is surely read
    acked = acked_values(h)
    candidates = [(k, o, v) for k, o, v in acked if any(k2 == k and o2 > o for k2, o2, _ in acked)]
    assume(candidates)
    k, o, v = candidates[pick % len(candidates)]
    for d in h.lines:
        if d["f"] == "poll" and d["type"] == "ok":
            for m in d["value"]:
                if str(k) in m[1]:
                    m[1][str(k)] = [pair for pair in m[1][str(k)] if pair[1] != v]
    r = _check(tmp_path, h, f"lost-{seed}-{pick}")
    assert r.valid is False
    assert r.anomalies["lost-write"]["count"] == 1
    assert r.anomalies["lost-write"]["examples"][0]["value"] == v


@SETTINGS
@given(seed=st.integers(0, 2**32), pick=st.integers(0, 10_000))
def test_changing_one_read_value_is_inconsistent_offsets(spark: Any, tmp_path: Path, seed: int, pick: int) -> None:
    h = correct_history(seed)
    reads = [
        (d, m, k, i)
        for d in h.lines
        if d["f"] == "poll" and d["type"] == "ok"
        for m in d["value"]
        for k, pairs in m[1].items()
        for i in range(len(pairs))
    ]
    assume(reads)
    d, m, k, i = reads[pick % len(reads)]
    # the offset must be observed somewhere else too (an acknowledged send, another read): a value
    # read nowhere else -- say the final drain's read of an unacknowledged send -- has nothing to be
    # inconsistent with, and the checker rightly calls it only `unexpected`
    offset = m[1][k][i][0]
    others = sum(1 for _, m2, k2, i2 in reads if k2 == k and m2[1][k2][i2][0] == offset) - 1
    others += sum(1 for d2 in h.lines if d2["f"] == "send" and d2["type"] == "ok"
                  for mop in d2["value"] if str(mop[1]) == k and mop[2][0] == offset)
    assume(others > 0)
    m[1][k][i] = [m[1][k][i][0], 10**9 + pick]
    r = _check(tmp_path, h, f"inc-{seed}-{pick}")
    assert r.valid is False
    assert "inconsistent-offsets" in r.anomalies
