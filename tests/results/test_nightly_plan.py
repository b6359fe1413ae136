"""The nightly without Docker: the matrix a TOML file makes, the budget that skips what does not fit,
a crashing run that becomes a JUnit <error> while the night goes on, and the JUnit XML itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.nightly import plan_from
from kernel.errors import UsageError
from kernel.spec import load_toml
from results.junit import Case, junit_xml

ROOT = Path(__file__).resolve().parents[2]
CHAOS = str(Path(sys.executable).parent / "chaos")
#: a night started with a bare environment still checks on the session's server (tests/conftest.py),
#: not on one of its own left running in the test's home
SESSION_CHECK_SERVER = {k: v for k, v in os.environ.items() if k.startswith("CHAOS_CHECK_SERVER")}

MATRIX: dict[str, Any] = {
    "name": "nn",
    "seeds": [1, 2],
    "workloads": ["queue", "hotkey"],
    "base": {"nodes": 3, "time-limit": 20},
    "nemeses": {"kills": ["kill-controller"], "parts": ["partition"]},
    "configs": {"default": {}, "canary": {"bugs": ["ack-before-replication"], "workloads": ["hotkey"],
                                          "nemeses": ["kills"], "seeds": [2]}},
}


def test_matrix_is_workloads_x_nemeses_x_configs_x_seeds_seed_by_seed() -> None:
    plan = plan_from(MATRIX, store="/tmp/s")
    labels = [(c.seed, c.label) for c in plan.cells]
    assert labels == [
        (1, "queue/kills/default"), (1, "queue/parts/default"), (1, "hotkey/kills/default"),
        (1, "hotkey/parts/default"),
        (2, "queue/kills/default"), (2, "queue/parts/default"), (2, "hotkey/kills/default"),
        (2, "hotkey/parts/default"), (2, "hotkey/kills/canary"),
    ]
    canary = plan.cells[-1].spec
    assert canary.bugs == ("ack-before-replication",) and canary.nemesis == ("kill-controller",)
    assert canary.name == "hotkey-kills-canary" and canary.seed == 2 and canary.time_limit == 20
    assert {c.spec.store for c in plan.cells} == {"/tmp/s"}


@pytest.mark.parametrize("change, words", [
    ({"colour": "red"}, "unknown nightly setting"),
    ({"base": {"seed": 3}}, "may not set seed"),
    ({"base": {"nodes": 0}}, "nodes must be between"),
    ({"configs": {"x": {"nemeses": ["nope"]}}}, "nemesis mix 'nope'"),
    ({"configs": {"x": {"frobnicate": 1}}}, "unknown run setting"),
    ({"workloads": ["nosuch"]}, "unknown workload"),
    ({"nemeses": {"bad": ["kill-everything"]}}, "unknown nemesis"),
    ({"seeds": []}, "non-empty list"),
    ({"seeds": [12], "configs": {"bug": {"seeds": [11]}}}, r"\[configs.bug\] seeds \[11\] are not among the night's"),
    ({"configs": {"a-very-long-configuration-name-that-cannot-be-a-dir": {}}}, "shorten it"),
])
def test_a_bad_matrix_is_refused_before_anything_runs(change: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        plan_from({**MATRIX, **change})


def test_the_sample_nightly_fits_in_30_minutes() -> None:
    plan = plan_from(load_toml(ROOT / "nightly.toml"))
    estimate = sum(c.spec.time_limit + plan.overhead_s for c in plan.cells)
    assert len(plan.cells) >= 8
    assert estimate <= plan.budget_s <= 30 * 60
    out = subprocess.run([CHAOS, "nightly", "--config", str(ROOT / "nightly.toml"), "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and ": fits" in out.stdout, out.stdout + out.stderr


def _nightly(tmp_path: Path, toml: str, *extra: str,
             timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], Path]:
    cfg = tmp_path / "n.toml"
    cfg.write_text(toml)
    store = tmp_path / "store"
    out = subprocess.run([CHAOS, "nightly", "--config", str(cfg), "--store", str(store), "--no-progress", *extra],
                         capture_output=True, text=True, timeout=timeout,
                         env={"PATH": "/usr/bin:/bin", "CHAOS_HOME": str(tmp_path / "home"), "HOME": str(tmp_path),
                              **SESSION_CHECK_SERVER})
    return out, store


def _cases(junit: Path) -> list[ET.Element]:
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return suites[0].findall("testcase")


def test_the_budget_skips_what_does_not_fit_and_says_so(tmp_path: Path) -> None:
    out, store = _nightly(tmp_path, 'name = "tiny"\nbudget_minutes = 0.5\nworkloads = ["queue", "hotkey"]\n'
                                    '[base]\ntime_limit = 60\n[nemeses]\nnone = []\n')
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("skipped: needs about") == 2
    night = next(store.glob("tiny-*"))
    cases = _cases(night / "junit.xml")
    assert len(cases) == 2 and all(c.find("skipped") is not None for c in cases)
    doc = json.loads((night / "nightly.json").read_text())
    assert [e["outcome"] for e in doc["entries"]] == ["skipped", "skipped"]
    assert "tiny-" in (store / "index.html").read_text()  # the store index links the night


def test_a_crashing_run_is_an_error_case_and_the_night_goes_on(tmp_path: Path) -> None:
    """A host that refuses SSH: each run fails in provisioning; both are recorded, the exit code is
    the harness error's (3+, never 1, which would read as anomalies)."""
    hosts = tmp_path / "hosts"
    hosts.write_text("n1 127.0.0.1:1\n")
    out, store = _nightly(tmp_path, f'name = "crash"\nseeds = [1, 2]\n[base]\nnodes = 1\nreplication_factor = 1\n'
                                    f'min_insync = 1\ntime_limit = 2\nprovisioner = "ssh"\nhosts = "{hosts}"\n'
                                    f'cluster = "res-crash"\n[nemeses]\nnone = []\n')
    assert out.returncode >= 3, out.stderr
    night = next(store.glob("crash-*"))
    cases = _cases(night / "junit.xml")
    assert len(cases) == 2
    for c in cases:
        err = c.find("error")
        assert err is not None and c.find("failure") is None
        assert "chaos replay" in err.get("message", "")
    page = (night / "index.html").read_text()
    assert page.count('data-verdict="crashed"') == 2


def test_junit_xml_counts_and_escaping() -> None:
    cases = [
        Case("n.default", "queue-kills seed 1", 61.5, "passed"),
        Case("n.default", "queue-kills seed 2", 70.0, "failure", message="anomalies: lost-write; reproduce: chaos "
             "replay store/x", detail="run: store/x"),
        Case("n.default", "queue-kills seed 3", 3.0, "error", message="harness crashed: \x1b[31mboom\x00 <&>"),
        Case("n.default", "queue-kills seed 4", 0.0, "skipped", message="needs 2m"),
    ]
    root = ET.fromstring(junit_xml("n", cases))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("4", "1", "1",
                                                                                                       "1")
    assert float(suite.get("time", "0")) == pytest.approx(134.5)
    tcs = suite.findall("testcase")
    assert [tc.get("name") for tc in tcs] == [c.name for c in cases]
    failure = tcs[1].find("failure")
    assert failure is not None and "lost-write" in failure.get("message", "")
    error = tcs[2].find("error")
    assert error is not None and error.get("message") == "harness crashed: ?[31mboom? <&>"
    with pytest.raises(ValueError):
        Case("a", "b", 0, "flaky")


@pytest.mark.slow
@pytest.mark.spark
def test_the_nights_runs_are_judged_together_in_one_job(tmp_path: Path) -> None:
    """Two simulated runs (the clean cluster and `truncate-to-hw`, which kills find on seed 2 within
    10 simulated seconds) are stored unchecked, then judged by one Spark job at the end: each gets its
    own results.json and report, both by the same Spark application, and the JUnit shows one failure."""
    out, store = _nightly(tmp_path, 'name = "sim"\nbudget_minutes = 10\noverhead_seconds = 30\nseeds = [2]\n'
                                    'workloads = ["queue"]\n[base]\nprovisioner = "sim"\nnodes = 3\n'
                                    'time_limit = 10\nrate = 100\nnemesis_interval = 2\n[nemeses]\nkills = ["kill"]\n'
                                    '[configs.default]\n[configs.bug]\nbugs = ["truncate-to-hw"]\n')
    assert out.returncode == 1, out.stderr[-3000:]
    assert out.stderr.count("judged with the others at the end") == 2
    assert "checking 2 run(s) as one job" in out.stderr
    night = next(store.glob("sim-*"))
    doc = json.loads((night / "nightly.json").read_text())
    entries = doc["entries"]
    assert [e["outcome"] for e in entries] == ["valid", "invalid"], entries
    assert "lost-write" in entries[1]["anomalies"]
    assert entries[0]["spark_app"] and entries[0]["spark_app"] == entries[1]["spark_app"]
    assert doc["check_seconds"] > 0
    for e in entries:
        run = Path(e["run_dir"])
        verdict = json.loads((run / "results.json").read_text())
        assert verdict["valid"] is (e["outcome"] == "valid")
        assert (run / "report.html").is_file()
    cases = _cases(night / "junit.xml")
    assert [c.find("failure") is not None for c in cases] == [False, True]


def _sim_plan(tmp_path: Path) -> Any:
    return plan_from({"name": "stop", "budget_minutes": 10, "overhead_seconds": 30, "seeds": [1, 2],
                      "workloads": ["queue"], "base": {"provisioner": "sim", "nodes": 3, "time_limit": 10,
                                                       "rate": 20, "store": str(tmp_path / "store")},
                      "nemeses": {"none": []}, "configs": {"default": {}}})


def test_a_stop_during_the_nights_check_leaves_a_summary_that_says_so(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the stored runs are being judged: the night is marked interrupted, every run it
    did not judge is `incomplete` with the signal's exit code (never 0), and the summary is written."""
    from harness.nightly import run_night, write_summary
    from results.checker import KafkaChecker

    def stopped(self: Any, run_dirs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(KafkaChecker, "check_many", stopped)
    night = run_night(_sim_plan(tmp_path), progress=False, say=lambda _: None)
    assert [e.outcome for e in night.entries] == ["incomplete", "incomplete"]
    assert night.exit_code == 130 and night.interrupted and "SIGINT" in night.interrupted
    assert all(e.run_dir is not None and (e.run_dir / "history.jsonl").is_file() for e in night.entries)
    write_summary(night)
    doc = json.loads((night.out_dir / "nightly.json").read_text())
    assert doc["exit_code"] == 130 and doc["interrupted"]


@pytest.mark.spark
def test_when_the_batch_check_fails_each_run_is_judged_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.nightly import run_night
    from results.checker import KafkaChecker

    def broken(self: Any, run_dirs: Any) -> Any:
        raise RuntimeError("the batch's Spark job died")

    monkeypatch.setattr(KafkaChecker, "check_many", broken)
    said: list[str] = []
    night = run_night(_sim_plan(tmp_path), progress=False, say=said.append)
    assert [e.outcome for e in night.entries] == ["valid", "valid"], [e.message for e in night.entries]
    assert night.exit_code == 0
    assert any("checking them one by one" in s for s in said)


def test_a_sim_stage_is_read_from_the_plan_and_checked_before_anything_runs() -> None:
    plan = plan_from({**MATRIX, "sim": {"budget_minutes": 2, "rates": [20, 100], "time_limit": 30,
                                        "mixes": {"full": [], "kills": ["kill"],
                                                  "txn": {"workload": "txn", "nemesis": ["held-markers"]}}}},
                     store="/tmp/s")
    assert plan.sim is not None and list(plan.sim.mixes) == ["full", "kills", "txn"] and plan.sim.budget_s == 120
    assert plan.sim.bases["kills"].nemesis == ("kill",) and plan.sim.bases["full"].provisioner == "sim"
    assert plan.sim.bases["txn"].workload == "txn" and plan.sim.bases["txn"].nemesis == ("held-markers",)
    assert plan.sim.bases["full"].workload != "txn"
    for bad, words in (({"budget": 2}, "unknown \\[sim\\]"), ({"mixes": {"x": "kill"}}, "mixes"),
                       ({"mixes": {"x": {"workload": "txn", "faults": []}}}, "mix x"),
                       ({"mixes": {"x": {"workload": "no-such-workload"}}}, "no-such-workload"),
                       ({"mixes": {"x": ["no-such-family"]}}, "no-such-family"), ({"rates": ["fast"]}, "rate"),
                       ({"jobs": 0}, "whole numbers"), ({"spark_master": "nowhere"}, "not a Spark master")):
        with pytest.raises(UsageError, match=words):
            plan_from({**MATRIX, "sim": bad})


def test_a_sim_mix_sets_its_own_seed_length_fault_spacing_and_budget_weight() -> None:
    """The transactional switches need many short seeds with faults close together, the full mix
    long ones: a mix's table overrides the stage's time_limit and nemesis_interval for its seeds,
    and `share` weighs its part of the budget."""
    plan = plan_from({**MATRIX, "sim": {"budget_minutes": 4, "time_limit": 60, "nemesis_interval": 10, "mixes": {
        "full": [], "txn": {"workload": "txn", "nemesis": ["held-markers"], "time_limit": 30, "nemesis_interval": 5,
                            "share": 3}}}}, store="/tmp/s")
    sim = plan.sim
    assert sim is not None
    assert (sim.bases["txn"].time_limit, sim.bases["txn"].nemesis_interval) == (30, 5)
    assert (sim.bases["full"].time_limit, sim.bases["full"].nemesis_interval) == (60, 10)
    assert (sim.share_s("full"), sim.share_s("txn")) == (60, 180)
    assert sum(sim.share_s(m) for m in sim.mixes) == sim.budget_s
    for bad in ({"share": 0}, {"share": "big"}, {"time_limit": -1}, {"nemesis_interval": True}, {"rate": 5}):
        with pytest.raises(UsageError, match="mix x"):
            plan_from({**MATRIX, "sim": {"mixes": {"x": {"nemesis": ["kill"], **bad}}}})
    with pytest.raises(UsageError, match="time.limit"):  # the spec's own bounds apply to a mix's value
        plan_from({**MATRIX, "sim": {"mixes": {"x": {"nemesis": ["kill"], "time_limit": 0.5}}}})


@pytest.mark.spark
@pytest.mark.slow
def test_a_night_with_a_sim_stage_lists_its_failure_beside_the_container_runs(tmp_path: Path) -> None:
    """The sim stage finds a planted bug (its case fails with the saved run's replay command); the
    container run that no longer fits the budget is listed as skipped; one JUnit file, one page."""
    out, store = _nightly(tmp_path, 'name = "mixed"\nbudget_minutes = 1.5\n[base]\ntime_limit = 60\n'
                                    '[nemeses]\nnone = []\n'
                                    '[sim]\nbudget_minutes = 0.25\nmixes = { kills = ["kill"] }\nrates = [100]\n'
                                    'time_limit = 6\nnemesis_interval = 2\nbugs = ["truncate-to-hw"]\n'
                                    'check_batch = 0\nshrink = false\n', timeout=900)
    assert out.returncode == 1, out.stderr[-3000:]
    night = next(store.glob("mixed-*"))
    sim, container = _cases(night / "junit.xml")
    failure = sim.find("failure")
    assert sim.get("classname") == "mixed.sim-search" and failure is not None
    assert "chaos replay " in failure.get("message", "")
    assert container.find("skipped") is not None
    doc = json.loads((night / "nightly.json").read_text())
    assert [(e["kind"], e["outcome"]) for e in doc["entries"]] == [("sim", "invalid"), ("containers", "skipped")]
    run = Path(doc["entries"][0]["run_dir"])
    assert json.loads((run / "test.json").read_text())["search"]["found"]  # the search's finding, saved
    assert 'data-kind="sim"' in (night / "index.html").read_text()
    # the night's coverage holds the whole search's probes (every seed's, not only the saved one's)
    searched = doc["entries"][0]["probes"]
    assert searched and doc["coverage"]["per_mix"] == {"sim-kills": sorted(searched)}
    assert doc["coverage"]["switch_probes"]["truncate-to-hw"]["probe"] == "leader-elected-after-lagging-follow"
    assert set(doc["coverage"]["never_hit"]).isdisjoint(searched)


def test_a_nights_coverage_counts_its_simulator_searches() -> None:
    """A sim mix's probes (seeds that hit each) join the container runs' per mix and in the total;
    with no run directory to carry the registry, the one given says what was never hit."""
    from results.coverage import night_coverage

    registry = ({"a": "state a", "b": "state b", "c": "state c"}, {"bug-x": "b", "bug-y": "c"})
    cov = night_coverage([], [("sim-full", {"a": 3, "b": 1}), ("sim-kills", {"a": 2, "z": 0})], registry)
    assert cov is not None
    assert cov["per_mix"] == {"sim-full": ["a", "b"], "sim-kills": ["a"]}
    assert cov["hit"] == {"a": 5, "b": 1} and cov["never_hit"] == ["c"]
    assert cov["switch_probes"] == {"bug-x": {"probe": "b", "hit": True}, "bug-y": {"probe": "c", "hit": False}}
    assert night_coverage([], [], registry) is None
