"""Malformed histories: the checker names the line and the reason; a crashed run's tail is tolerated."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.errors import HistoryError
from kernel.history import scan
from tests.conftest import run_chaos

GOOD = [
    {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]]},
    {"index": 1, "time": 2, "process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]]},
]


def _write(tmp_path: Path, lines: list[str], newline: bool = True) -> Path:
    p = tmp_path / "history.jsonl"
    p.write_text("\n".join(lines) + ("\n" if newline else ""))
    return p


def _good() -> list[str]:
    return [json.dumps(d) for d in GOOD]


def test_truncated_last_line_is_a_warning_and_makes_it_incomplete(tmp_path: Path) -> None:
    v = scan(_write(tmp_path, [*_good(), '{"index": 2, "time": 3, "pro'], newline=False))
    assert v.truncated_tail and v.incomplete and "line 3" in v.warnings[0]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("not json at all", "line 2: not JSON"),
        ('{"index": 5, "time": 1, "process": 1, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]]}',
         "without an invoke"),
        (
            '{"index": 5, "time": 1, "process": 1, "type": "invoke", "f": "frobnicate", "value": []}',
            "f 'frobnicate' is not a client op",
        ),
        ('{"index": 0, "time": 1, "process": 1, "type": "invoke", "f": "send", "value": [["send", 0, 1]]}',
         "does not increase"),
        ('{"index": 5, "time": 1, "process": 1, "type": "maybe", "f": "send", "value": []}', "is not one of invoke"),
        ('{"index": 5, "process": 1, "type": "invoke", "f": "send", "value": []}', "lacks time"),
        ('{"index": 5, "time": 1, "process": 1, "type": "invoke", "f": "poll", "value": [["poll"]], '
         '"rebalance-log": [{"revoked": "a"}]}', r"rebalance-log\[0\]\.revoked must be a list of keys"),
        ('{"index":5,"time":1,"process":1,"type":"invoke","type":"ok","f":"send","value":[]}',
         "key 'type' appears twice"),
        ('{"index": 2, "time": 3, "process": 0, "type": "invoke", "f": "poll", "value": [["poll"]]}\n'
         '{"index":3,"time":4,"process":0,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1]],"0":[[1,2]]}]]}',
         "line 4: key '0' appears twice"),
    ],
)
def test_malformed_lines_are_errors_naming_the_line(tmp_path: Path, line: str, why: str) -> None:
    lines = [_good()[0], line, _good()[1]] if "not JSON" in why else [*_good(), line]
    with pytest.raises(HistoryError, match=why):
        scan(_write(tmp_path, lines))


def test_equal_keys_in_different_objects_are_not_duplicates(tmp_path: Path) -> None:
    """Only a key twice in the *same* object is refused; spaces and escapes take the careful path."""
    lines = [*_good(), '{"index": 2, "time": 3, "process": 0, "type": "invoke", "f": "poll", "value": [["poll"]]}',
             '{"index":3,"time":4,"process":0,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1]],"1":[[0,2]]}]],'
             '"error":"\\u00e9t\\u00e9"}',
             '{ "index" : 4, "time": 5, "process": 0, "type": "invoke", "f": "poll", "value": [["poll"]]}',
             '{"index":5,"time":6,"process":0,"type":"ok","f":"poll","value":[["poll",{"0":[[1,1]]}]]}']
    v = scan(_write(tmp_path, lines))
    assert v.client_ops == 6 and not v.incomplete


def test_invoke_without_completion_is_a_warning(tmp_path: Path) -> None:
    v = scan(_write(tmp_path, [*_good(), json.dumps({**GOOD[0], "index": 2, "process": 3})]))
    assert v.incomplete and "process 3" in v.warnings[0]


@pytest.mark.spark
def test_chaos_check_cli_exit_codes(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    _write(bad, [_good()[0], "garbage", _good()[1]])
    res = run_chaos("check", str(bad / "history.jsonl"), "--no-perf")
    assert res.returncode == 2 and "line 2: not JSON" in res.stderr and "Traceback" not in res.stderr
    torn = tmp_path / "torn"
    torn.mkdir()
    _write(torn, [*_good(), '{"index": 2, "ti'], newline=False)
    res = run_chaos("check", str(torn), "--no-perf")
    assert res.returncode == 2, res.stderr
    assert json.loads((torn / "results.json").read_text())["valid"] == "unknown"
    res = run_chaos("check", str(tmp_path / "missing"))
    assert res.returncode == 3 and "does not exist" in res.stderr


@pytest.mark.spark
def test_many_paths_each_get_their_own_verdict_and_the_worst_exit_code(
        spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One bad path does not stop the others; a torn history is unknown, a good one valid; the
    summary says so per path and the exit code is the worst (a usage error, 3)."""
    from kernel.errors import UsageError
    from results.check import CheckResult, check_runs, print_summary

    good, torn = tmp_path / "good", tmp_path / "torn"
    for d in (good, torn):
        d.mkdir()
    _write(good, _good())
    _write(torn, [*_good(), '{"index": 2, "ti'], newline=False)
    paths = [tmp_path / "missing", good, torn]
    got = check_runs(paths, spark_master="local[2]", perf=False, elle_cli="")
    assert isinstance(got[0], UsageError)
    assert isinstance(got[1], CheckResult) and isinstance(got[2], CheckResult)
    assert got[1].valid is True
    assert got[2].valid == "unknown" and json.loads((torn / "results.json").read_text())["valid"] == "unknown"
    assert print_summary(paths, got) == 3
    err = capsys.readouterr().err
    assert "ERROR" in err and "does not exist" in err and "3 checked" in err and "UNKNOWN" in err


@pytest.mark.spark
def test_replica_dumps_stay_with_their_run_when_an_earlier_path_is_not_judged(spark: object, tmp_path: Path) -> None:
    """Runs are numbered by their place among the paths, and a path that is refused or has no send or
    poll (invalid without a Spark job: empty-transaction-graph) is skipped: the replica dumps of the
    runs after it must still join their own run's facts (divergent replicas found in their run,
    nowhere else)."""
    from results.check import CheckResult, check_runs

    corpus = Path(__file__).resolve().parent / "corpus"
    bad, nothing = tmp_path / "bad", tmp_path / "nothing"
    for d in (bad, nothing):
        d.mkdir()
    _write(bad, ['{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll", "value": "x"}'])
    _write(nothing, ['{"index": 0, "time": 1, "process": "nemesis", "type": "info", "f": "start-kill", "value": null}'])
    div, ok = tmp_path / "div", tmp_path / "ok"
    shutil.copytree(corpus / "divergent-replicas", div)
    shutil.copytree(corpus / "valid-basic", ok)
    got = check_runs([bad, nothing, ok, div], spark_master="local[2]", perf=False, elle_cli="")
    assert not isinstance(got[0], CheckResult) and isinstance(got[1], CheckResult)
    assert got[1].valid is False and got[1].bad_error_types == ["empty-transaction-graph"]  # as Jepsen judges it
    assert isinstance(got[2], CheckResult) and got[2].valid is True, got[2].anomalies
    assert isinstance(got[3], CheckResult) and "divergent-replicas" in got[3].anomalies, got[3].anomalies


def _killed_jvm_env(tmp_path: Path) -> dict[str, str]:
    """A killed JVM runs no shutdown hook: its scratch directories go under the test's own."""
    return {**os.environ, "SPARK_LOCAL_DIRS": str(tmp_path / "spark-local"), "CHAOS_CHECK_SERVER": "0"}


KILL_JVM_THEN_CHECK = """
import sys
import results.jobs as jobs

judge = jobs._collect


def killed_first(spark, queries):
    proc = spark.sparkContext._gateway.proc  # the driver JVM, as an OutOfMemoryError takes it down
    proc.kill()
    proc.wait()
    return judge(spark, queries)


jobs._collect = killed_first
from harness.cli import main

sys.exit(main(["check", sys.argv[1]]))
"""


@pytest.mark.spark
def test_a_driver_jvm_that_dies_mid_check_is_named_not_a_harness_bug(tmp_path: Path) -> None:
    """A task's OutOfMemoryError kills the driver JVM in local mode. The check then saw only refused
    connections, reported an internal error (exit 7) and hid the cause; now it says the JVM died and
    what to change, as an environment problem (exit 6), and judges nothing."""
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "corpus" / "valid-basic", run)
    out = subprocess.run([sys.executable, "-c", KILL_JVM_THEN_CHECK, str(run)], capture_output=True, text=True,
                         timeout=300, env=_killed_jvm_env(tmp_path))
    assert out.returncode == 6, out.stderr[-3000:]
    assert "the Spark driver JVM died during the check" in out.stderr and "CHAOS_SPARK_DRIVER_MEMORY" in out.stderr
    assert "internal error" not in out.stderr and not (run / "results.json").exists()


@pytest.mark.spark
def test_a_process_whose_driver_jvm_died_says_so_when_asked_for_spark_again(tmp_path: Path) -> None:
    """After the JVM died (a nightly checks again run by run), asking for the session is an
    environment problem, not a session whose every call fails with a refused connection."""
    script = """
import sys
from kernel.errors import EnvironmentProblem
from results.spark import get_spark

proc = get_spark("local[1]").sparkContext._gateway.proc
proc.kill()
proc.wait()
try:
    get_spark("local[1]")
except EnvironmentProblem as e:
    print(e)
    sys.exit(0)
sys.exit(1)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env=_killed_jvm_env(tmp_path))
    assert out.returncode == 0 and "the Spark driver JVM of this process died" in out.stdout, out.stderr[-2000:]
