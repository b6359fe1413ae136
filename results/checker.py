"""The run's checker as the orchestrator sees it (`kernel.checker.Checker`): Spark checks + elle-cli,
then the plots, report and store index (`results.present.render_run`).

On the default master its session comes from the shared warm check server (`results.server`), as
`chaos check`'s does: a `chaos run` then pays no driver JVM of its own, and every run of a night, a
`--test-count` or a `chaos detect` after the first finds the checks' classes compiled. Where no server
can be had (`CHAOS_CHECK_SERVER=0`, a failed start) the run checks in its own process as before."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel.errors import ChaosError

if TYPE_CHECKING:
    from results.check import CheckResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaChecker:
    """Jepsen's Kafka anomalies on Spark, folded with elle-cli where installed."""

    spark_master: str | None = None
    elle_cli: str | None = None

    def announce(self) -> str | None:
        """What to say once when a run starts: which anomalies will not be looked for (elle-cli's, when
        it is not installed), or None."""
        from results.elle import absent_note

        return absent_note(self.elle_cli)

    def warm_up(self, run_dir: Path) -> None:
        """Start the Spark session (the shared server's, or this process's) and compile the checks in
        the background while the run's cluster comes up and its workload goes (`results.warm`); a JVM
        of this process writes its output to the run's spark.log."""
        from results import warm

        self._share()
        warm.start(self.spark_master, run_dir / "spark.log")

    def _share(self) -> None:
        from results.spark import use_server

        use_server(self.spark_master is None)

    def check(self, run_dir: Path) -> CheckResult:
        from results import warm
        from results.check import check_run

        self._share()
        warm.finish()
        result = check_run(run_dir, spark_master=self.spark_master, elle_cli=self.elle_cli, on_perf=draw)
        render(run_dir, plots=False)
        return result

    def check_many(self, run_dirs: Sequence[Path]) -> list[CheckResult | ChaosError]:
        from results.check import CheckResult, check_runs

        self._share()
        results = check_runs(list(run_dirs), spark_master=self.spark_master, elle_cli=self.elle_cli,
                             on_perf=draw)
        for d, r in zip(run_dirs, results, strict=True):
            if isinstance(r, CheckResult):
                render(d, plots=False)
        return results

    def print(self, verdict: Any) -> None:
        from results.check import print_verdict

        print_verdict(verdict)
        report = Path(verdict.run_dir or ".") / "report.html"
        if verdict.run_dir is not None and report.is_file():
            print(f"report: {report}", flush=True)


def draw(run_dir: Path) -> None:
    """The run's plots, drawn while the check's Spark jobs run (`check_runs`' `on_perf`)."""
    from results.present import draw_plots

    draw_plots(run_dir)


def render(run_dir: Path, *, plots: bool = True) -> None:
    """Plots (unless `draw` drew them), report and index; the verdict is already written, so a
    failure here is a warning only."""
    from results.present import render_run

    try:
        render_run(run_dir, plots=plots)
    except Exception as e:  # a broken plot must not turn a checked run into a crashed one
        log.warning("the report for %s could not be written: %s: %s", run_dir, type(e).__name__, e)
