"""The check's warm-up (`results.warm`): its tiny run goes through every query and is judged valid,
and `finish` waits for it; a later check in the same process uses the same session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from results import frames
from results.check import check_run
from results.spark import get_spark
from results.warm import WarmUp, _tiny_run


def test_the_warm_up_judges_its_tiny_run_valid_and_leaves_the_session_up(spark: Any, tmp_path: Path) -> None:
    w = WarmUp("local[2]", tmp_path / "spark.log")
    w.start()
    w.join()
    w.finish()
    assert w.error is None and w.valid is True
    run = tmp_path / "run"
    _tiny_run(run)
    try:
        r = check_run(run, spark_master="local[2]", perf=False, elle_cli="")
        assert r.valid is True and get_spark("local[2]") is spark  # one session, started once
        # the warm-up compiled the checks' classes: a small check now uses generated code too
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    finally:
        frames.classes_cached(False)  # the other tests of this process check small inputs interpreted
    check_run(run, spark_master="local[2]", perf=False, elle_cli="")
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"


def test_a_hurried_warm_up_skips_its_tiny_check(spark: Any, tmp_path: Path) -> None:
    """The run ended before the warm-up got past the session: the check should not wait for more."""
    w = WarmUp("local[2]", tmp_path / "spark.log")
    w.finish()  # before it even started
    w.start()
    w.join()
    assert w.error is None and w.valid is None
    check_run(_tiny(tmp_path), spark_master="local[2]", perf=False, elle_cli="")
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"  # nothing compiled: interpreted


def _tiny(tmp_path: Path) -> Path:
    _tiny_run(tmp_path / "run")
    return tmp_path / "run"
