"""Every hand-written corpus history gets exactly the anomalies its expected.json names, through the
same Spark pipeline `chaos check` uses: all cases as one job keyed by run (`check_runs`, as
`chaos check STORE/*/*` does), so a case also proves its neighbours' rows never leak into it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from results.check import CYCLE_BAD, EMPTY, CheckResult, bad_types, check_run, check_runs

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def batch(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, CheckResult]]:
    root = tmp_path_factory.mktemp("corpus")
    runs = []
    for case in CASES:
        shutil.copytree(CORPUS / case, root / case)
        runs.append(root / case)
    results = check_runs(runs, spark_master="local[2]", perf=False, elle_cli="")
    out = {}
    for case, run, r in zip(CASES, runs, results, strict=True):
        assert isinstance(r, CheckResult), f"{case}: {r}"
        out[case] = (run, r)
    return out


def _drain(run: Path, test_json: dict[str, Any] | None) -> tuple[bool, bool]:
    """(complete, gave up) of the case's final drain, from its own lines: any final op makes a drain;
    one whose last completion is not ok stopped short."""
    finals = [d for d in map(json.loads, (run / "history.jsonl").read_text().splitlines())
              if d.get("final") and d["type"] != "invoke"]
    gave_up = bool(finals) and finals[-1]["type"] != "ok"
    return bool(finals) and not gave_up, gave_up


@pytest.mark.parametrize("case", CASES)
def test_corpus_case(batch: dict[str, tuple[Path, CheckResult]], case: str) -> None:
    run, result = batch[case]
    expected = json.loads((run / "expected.json").read_text())
    assert sorted(result.anomalies) == expected, json.dumps(result.to_json(), default=str)[:2000]
    test_json = json.loads((run / "test.json").read_text()) if (run / "test.json").exists() else None
    drained, gave_up = _drain(run, test_json)
    bad = [a for a in expected if a in bad_types(test_json, drained=drained)
           or (a in CYCLE_BAD and result.anomalies[a]["without_ww"] > 0)]
    unknown = not bad and gave_up  # a drain that gave up: the end of the log was never read
    assert result.valid == (False if bad else "unknown" if unknown else True)
    assert result.bad_error_types == sorted(bad)
    assert result.exit_code == (1 if bad else 2 if unknown else 0)
    written = json.loads((run / "results.json").read_text())
    assert written["valid"] == result.valid and written["error_types"] == expected
    if EMPTY not in expected:  # a history with no send or poll is judged without the Spark job
        empty = sum(EMPTY in json.loads((CORPUS / c / "expected.json").read_text()) for c in CASES)
        assert written["timings_s"]["runs_in_job"] == len(CASES) - empty
    for name in expected:
        assert written[name]["count"] >= 1 and written[name]["examples"], name


def test_one_run_alone_gets_the_same_answer_as_in_the_batch(
        spark: Any, batch: dict[str, tuple[Path, CheckResult]], tmp_path: Path) -> None:
    run = tmp_path / "poll-skip"
    shutil.copytree(CORPUS / "poll-skip", run)
    alone = check_run(run, spark_master="local[2]", perf=False, elle_cli="")
    assert alone.to_json()["error_types"] == batch["poll-skip"][1].to_json()["error_types"] == ["poll-skip"]
    assert alone.anomalies["poll-skip"]["examples"] == batch["poll-skip"][1].anomalies["poll-skip"]["examples"]
    assert "runs_in_job" not in alone.timings


def test_subscribe_makes_poll_skip_and_nonmonotonic_poll_not_bad() -> None:
    assigned = bad_types({"config": {"sub_via": ["assign"]}})
    both = bad_types({"config": {"sub_via": ["assign", "subscribe"]}})
    assert {"poll-skip", "nonmonotonic-poll"} <= set(assigned) and {"poll-skip", "nonmonotonic-poll"} <= set(
        bad_types(None))
    assert not {"poll-skip", "nonmonotonic-poll"} & set(both)
    assert set(assigned) - set(both) == {"poll-skip", "nonmonotonic-poll"}


def test_every_anomaly_has_a_case_and_a_near_miss() -> None:
    from results.anomalies import CHECKERS

    shown = set()
    for case in CASES:
        shown.update(json.loads((CORPUS / case / "expected.json").read_text()))
    assert set(CHECKERS) <= shown
    near = [c for c in CASES if c.startswith("near-")]
    without_near = [a for a in CHECKERS if not any(c == f"near-{a}" or c.startswith(f"near-{a}-") for c in near)]
    assert not without_near, f"anomalies without a near-miss case: {without_near}"


def test_a_generated_transactional_history_is_valid(spark: Any, tmp_path: Path) -> None:
    """The benchmark's transactional history (a correct log) through the whole pipeline: valid, with
    the cycles Kafka's interleaved transactions make reported and none of them bad."""
    from results.bench import generate_txn

    generate_txn(tmp_path / "history.jsonl", 5_000, seed=2)
    r = check_run(tmp_path, spark_master="local[2]", perf=False, elle_cli="")
    assert r.valid is True and r.bad_error_types == [], r.to_json()
    cycles = {t: r.anomalies[t] for t in ("G0", "G1c", "G0-realtime", "G1c-realtime") if t in r.anomalies}
    assert cycles and all(c["without_ww"] == 0 for c in cycles.values()), cycles
