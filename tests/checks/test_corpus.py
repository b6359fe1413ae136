"""Every hand-written corpus history gets exactly the anomalies its expected.json names, through the
same Spark pipeline `chaos check` uses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from results.check import bad_types, check_run

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
pytestmark = pytest.mark.spark


@pytest.mark.parametrize("case", CASES)
def test_corpus_case(spark: Any, case: str, tmp_path: Path) -> None:
    run = tmp_path / case
    shutil.copytree(CORPUS / case, run)
    expected = json.loads((run / "expected.json").read_text())
    result = check_run(run, spark_master="local[2]", perf=False)
    assert sorted(result.anomalies) == expected, json.dumps(result.to_json(), default=str)[:2000]
    test_json = json.loads((run / "test.json").read_text()) if (run / "test.json").exists() else None
    bad = [a for a in expected if a in bad_types(test_json, drained=True)]
    assert result.valid is (not bad)
    assert result.bad_error_types == sorted(bad)
    assert result.exit_code == (1 if bad else 0)
    written = json.loads((run / "results.json").read_text())
    assert written["valid"] == result.valid and written["error_types"] == expected
    for name in expected:
        assert written[name]["count"] >= 1 and written[name]["examples"], name


def test_every_anomaly_has_a_case_and_a_near_miss() -> None:
    from results.anomalies import CHECKERS

    shown = set()
    for case in CASES:
        shown.update(json.loads((CORPUS / case / "expected.json").read_text()))
    assert set(CHECKERS) <= shown
    near = [c for c in CASES if c.startswith("near-")]
    without_near = [a for a in CHECKERS if not any(c == f"near-{a}" or c.startswith(f"near-{a}-") for c in near)]
    assert not without_near, f"anomalies without a near-miss case: {without_near}"
