"""Coverage from the nodes' probes.json: summed over nodes, the probes never hit listed, a bug switch whose
probe was not hit called "not exercised" (in results.json's note and beside the report's verdict), and
a run stored before probes existed has no coverage rather than a wrong one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from results.coverage import read_coverage, run_coverage, verdict_note
from results.present import render_run
from results.report import coverage_rows

REGISTRY = {"a": "state a", "b": "state b", "c": "state c"}
BUG_PROBES = {"bug-on-b": "b", "bug-on-a": "a"}


def _node(replicas: Path, name: str, counts: dict[str, int]) -> None:
    (replicas / name).mkdir(parents=True, exist_ok=True)
    (replicas / name / "probes.json").write_text(json.dumps(
        {"counts": counts, "processes": 1, "probes": REGISTRY, "bug_probes": BUG_PROBES}))


def test_counts_are_summed_and_a_switch_whose_probe_was_not_hit_is_not_exercised(tmp_path: Path) -> None:
    _node(tmp_path, "n1", {"a": 2})
    _node(tmp_path, "n2", {"a": 1, "c": 4})
    cov = read_coverage(tmp_path, ["bug-on-a", "bug-on-b"])
    assert cov is not None
    assert cov.hit == {"a": 3, "c": 4} and cov.not_hit == ["b"] and cov.nodes == 2
    assert cov.not_exercised == {"bug-on-b": "b"}
    j = cov.to_json()
    assert j["bugs"] == {"bug-on-a": {"probe": "a", "hit": True}, "bug-on-b": {"probe": "b", "hit": False}}
    assert verdict_note(j) == "not exercised: bug-on-b (probe b not hit)"
    assert verdict_note(j, "unknown") == "not exercised: bug-on-b (probe b not hit)"
    # beside anomalies the run reached the bug some way: the note must not contradict the verdict
    assert verdict_note(j, False) == "found without the scenario's probe: bug-on-b (probe b not hit)"
    assert "state b" in cov.explain("bug-on-b")


def test_no_probe_files_no_coverage(tmp_path: Path) -> None:
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "t-0.jsonl").write_text("{}\n")
    assert read_coverage(tmp_path, ["bug-on-a"]) is None
    assert verdict_note(None) == "" and coverage_rows({"valid": True}) is None


def test_the_report_says_not_exercised_beside_the_verdict(valid_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "store" / "t" / valid_run.name
    shutil.copytree(valid_run, run)
    for node in ("n1", "n2", "n3"):
        _node(run / "replicas", node, {"a": 1})
    test = json.loads((run / "test.json").read_text())
    test["config"]["bugs"] = ["bug-on-b"]
    (run / "test.json").write_text(json.dumps(test))
    cov = run_coverage(run)
    assert cov is not None and cov.not_exercised == {"bug-on-b": "b"}
    results = json.loads((run / "results.json").read_text())
    results["coverage"] = cov.to_json()
    results["verdict_note"] = verdict_note(results["coverage"])
    (run / "results.json").write_text(json.dumps(results))
    render_run(run)
    html = (run / "report.html").read_text()
    assert 'id="not-exercised"' in html and "not exercised: bug-on-b (probe b not hit)" in html
    assert 'data-probe="b"' in html and "NOT EXERCISED" in html
    rows = coverage_rows(results)
    assert rows is not None and [r["probe"] for r in rows["rows"]][0] == "b"  # never hit first
