"""The batch's Spark jobs run side by side (`results.jobs`); a checker that crashes is still named and
makes the verdict unknown, while every other checker in its half, the other half and the cycle search
still count (STYLE.md 7: a crash is never a pass)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import results.jobs as jobs
from results.anomalies import Group
from results.background import run_all
from results.check import check_run

CORPUS = Path(__file__).parent / "corpus"
#: a checker whose query fails at run time, on every row of the table
PLANTED = Group(("planted-crash",), "SELECT run, 'planted-crash', CAST(raise_error('planted') AS STRING) FROM {t}")


@pytest.mark.parametrize("where", [1, 2], ids=["other-half", "same-half"])
def test_a_crashing_checker_is_named_and_the_others_still_count(spark: Any, tmp_path: Path, where: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(CORPUS / "lost-write", run)
    groups = list(jobs.GROUPS)
    # the halves alternate: the lost-write group (first) shares its half with the planted one at 2
    groups.insert(where, PLANTED)
    assert (PLANTED in groups[0::jobs.HALVES]) == (where == 2)
    monkeypatch.setattr(jobs, "GROUPS", groups)
    got = check_run(run, spark_master="local[2]", perf=False, elle_cli="")
    assert got.valid is False and "lost-write" in got.bad_error_types  # found despite the crash beside it
    assert any(w.startswith("checker planted-crash crashed:") and "planted" in w for w in got.warnings), got.warnings


def test_a_crash_alone_makes_the_verdict_unknown(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(CORPUS / "valid-basic", run)
    monkeypatch.setattr(jobs, "GROUPS", [*jobs.GROUPS, PLANTED])
    got = check_run(run, spark_master="local[2]", perf=False, elle_cli="")
    assert got.valid == "unknown" and got.exit_code == 2, (got.valid, got.warnings)


def test_an_environment_problem_wins_and_an_interrupt_cancels_the_jobs_at_once() -> None:
    """A dead JVM fails every job: the sentence that says so is raised, not a refused connection. A
    stop signal while waiting calls the cancel hook and is raised without waiting for the jobs."""
    import signal
    import threading

    from kernel.errors import EnvironmentProblem

    def refused() -> None:
        raise ConnectionRefusedError("refused")

    def dead() -> None:
        raise EnvironmentProblem("the Spark driver JVM died")

    with pytest.raises(EnvironmentProblem):
        run_all([refused, dead], "t")
    release, cancelled = threading.Event(), []

    def ctrl_c(*_: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, ctrl_c)
    signal.setitimer(signal.ITIMER_REAL, 0.3)  # the user's Ctrl-C, while a job still runs
    try:
        with pytest.raises(KeyboardInterrupt):
            run_all([release.wait], "t", on_interrupt=lambda: cancelled.append(True))
    finally:
        signal.signal(signal.SIGALRM, old)
        release.set()
    assert cancelled == [True]


def test_the_first_error_in_task_order_is_raised_after_every_task_ended() -> None:
    ended: list[int] = []

    def task(i: int, fail: bool) -> int:
        ended.append(i)
        if fail:
            raise ValueError(f"task {i}")
        return i

    assert run_all([lambda: task(0, False), lambda: task(1, False)], "t") == [0, 1]
    with pytest.raises(ValueError, match="task 1"):
        run_all([lambda: task(0, False), lambda: task(1, True), lambda: task(2, True)], "t")
    assert sorted(ended) == [0, 0, 1, 1, 2]  # every task ran to its end
