"""The terminal holds our own sentences only: the Spark driver JVM's output (the launcher's
"Using incubator modules", Spark's log4j banner, the NativeCodeLoader warning) goes to the run's
spark.log, and a JVM that does not come up is this machine's problem, said with where its output is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHAOS
from tests.foundation.test_bad_input import GOOD, hist

CHATTER = ("Using incubator modules", "log4j", "NativeCodeLoader", "setLogLevel", "WARN")


def _check(run: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHAOS, *args, "check", "--no-perf", "--elle-cli", "", str(run)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.spark
def test_a_check_shows_no_jvm_chatter_and_keeps_it_in_spark_log(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text(hist(*GOOD))
    res = _check(run, env={"CHAOS_CHECK_SERVER": "0"})  # a driver JVM of its own, whose log this is
    assert res.returncode == 0, res.stderr[-2000:]
    for noise in CHATTER:
        assert noise not in res.stderr and noise not in res.stdout, res.stderr
    assert "log4j" in (run / "spark.log").read_text()


def test_a_jvm_that_does_not_start_is_this_machines_problem(tmp_path: Path) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'Error: this java is broken on purpose' >&2\nexit 1\n")
    java.chmod(0o755)
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text(hist(*GOOD))
    res = _check(run, env={"JAVA_HOME": str(home), "CHAOS_CDS": "0", "CHAOS_CHECK_SERVER": "0"})
    assert res.returncode == 6, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("chaos: the Spark driver JVM did not start") and str(run / "spark.log") in last, last
    assert "Traceback" not in res.stderr


@pytest.mark.spark
def test_several_runs_in_one_command_say_what_is_not_looked_for_once(tmp_path: Path) -> None:
    """`--test-count`, `chaos detect` and a night run many checks in one process: the sentence that
    elle-cli is absent is said at the first run's start, not again at every run."""
    bare = tmp_path / "bin"  # a PATH without elle-cli, whatever this machine has installed
    bare.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ELLE_CLI"}
    env["PATH"] = f"{bare}{os.pathsep}{os.path.dirname(CHAOS)}{os.pathsep}/usr/bin{os.pathsep}/bin"
    res = subprocess.run([CHAOS, "run", "--provisioner", "sim", "--nodes", "3", "--time-limit", "5", "--rate", "10",
                          "--nemesis", "kill", "--seed", "3", "--test-count", "2", "--store", str(tmp_path / "store")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr.count("elle-cli not found") == 1, res.stderr
    assert res.stderr.count("VALID") >= 2, res.stderr  # both runs were checked


def test_a_librarys_root_logging_call_does_not_open_the_terminal_to_broker_records() -> None:
    """py4j logs a failed gateway command with the module-level `logging.info`, whose implicit
    basicConfig used to give the root logger a stderr handler: from then on every INFO record of the
    in-process broker (a night's sim stage shrinking a seed) reached the terminal. Without `-v` the
    terminal stays ours; with it the records are shown."""
    script = ("import logging, sys\n"
              "from harness.cli import cli\n"
              "cli.main(args=sys.argv[1:] + ['nemeses'], standalone_mode=False)\n"
              "logging.info('a library logs at the root')\n"
              "lg = logging.getLogger('logbroker.txn.coordinator')\n"
              "lg.setLevel(logging.INFO)\n"
              "lg.info('a broker record')\n"
              "lg.warning('a broker warning')\n"
              "logging.getLogger('harness.pool').warning('a warning of ours')\n")
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert "a broker record" not in quiet.stderr and "a library logs" not in quiet.stderr, quiet.stderr
    assert "a broker warning" not in quiet.stderr, quiet.stderr
    assert "a warning of ours" in quiet.stderr  # as Python's last resort showed it before
    loud = subprocess.run([sys.executable, "-c", script, "-v"], capture_output=True, text=True, timeout=120)
    assert "a broker record" in loud.stderr, loud.stderr
