"""The terminal holds our own sentences only: the Spark driver JVM's output (the launcher's
"Using incubator modules", Spark's log4j banner, the NativeCodeLoader warning) goes to the run's
spark.log, and a JVM that does not come up is this machine's problem, said with where its output is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import CHAOS
from tests.foundation.test_bad_input import GOOD, hist

CHATTER = ("Using incubator modules", "log4j", "NativeCodeLoader", "setLogLevel", "WARN")


def _check(run: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHAOS, *args, "check", "--no-perf", "--elle-cli", "", str(run)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def test_a_check_shows_no_jvm_chatter_and_keeps_it_in_spark_log(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text(hist(*GOOD))
    res = _check(run)
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
    res = _check(run, env={"JAVA_HOME": str(home), "CHAOS_CDS": "0"})
    assert res.returncode == 6, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("chaos: the Spark driver JVM did not start") and str(run / "spark.log") in last, last
    assert "Traceback" not in res.stderr
