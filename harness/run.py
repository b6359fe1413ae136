"""`run(test)`: one chaos run, start to finish, as nested phases (see `phases.py`).

    recording                  the run directory, test.json (complete: false) and the history
      provisioned              nodes up; down at the end (unless --leave-running)
        deployed               ZooKeeper + brokers, the topic; torn down at the end
          armed                the fault schedule; every fault healed on the way out
            recorded           workers and nemesis for the time limit
            healed             heal, then wait until every partition has a leader and full ISR
          drained              the final generator (the drain)
          collected            replica dumps, node logs
      checked                  the checker's verdict, results.json

A stop signal (Ctrl-C, SIGTERM, SIGHUP) anywhere unwinds the same phases — heal, tear down, keep
the history — and `test.json` records where the run stopped; the exit code says which signal.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.phases import armed, collected, deployed, drained, healed, provisioned, recorded, recording
from harness.signals import signum_of, stop_signals
from kernel.errors import ChaosError, Interrupted
from kernel.test import Test

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    valid: Any
    anomalies: list[str]
    bad: list[str] = field(default_factory=list)


def _stderr(line: str) -> None:
    print(f"chaos: {line}", file=sys.stderr)


def run_simulated(test: Test, say: Callable[[str], None] = _stderr, *, faults: list[Any] | None = None,
                  check: bool = True, extra_meta: dict[str, Any] | None = None) -> RunOutcome:
    """The same run inside the deterministic simulator (`harness/provision/sim.py`): the store, the
    history, the check and the report as for containers; every phase on simulated time. `faults`:
    a schedule to use instead of the seed's (a shrunk one, saved with `schedule_shrunk`)."""
    import time

    from harness.provision.sim import check_determinism, simulate
    from kernel.node import node_names
    from kernel.store import RunDir

    spec = test.spec
    with stop_signals():
        rd = RunDir.create(spec)
        try:
            rd.write_meta(**(test.info or {}), **(extra_meta or {}), provisioner="sim")
            if faults is None:
                faults = test.nemesis.plan(node_names(spec.nodes))
            rd.write_meta(schedule=[f.to_json() for f in faults], phase="simulate")
            t0 = time.monotonic()
            out = simulate(spec, test.workload, faults, rd.path, say)
            rd.write_meta(recovered=out.recovered, drained=out.drained, worker_errors=out.worker_errors,
                          ops=out.ops, sim_seconds=round(out.sim_seconds, 3),
                          wall_seconds=round(time.monotonic() - t0, 3), sim_loop_errors=out.loop_errors[:20])
            if spec.check_determinism:
                rd.write_meta(phase="check-determinism")
                check_determinism(spec, test.workload, faults, rd.history)
                say(f"seed {spec.seed}: two simulations wrote the identical history")
            rd.write_meta(complete=True, phase="check")
            if not check:
                rd.write_meta(phase="done")
                return RunOutcome(rd.path, 0, "unchecked", [])
            verdict = test.checker.check(rd.path)
            rd.write_meta(phase="done")
        except KeyboardInterrupt as e:
            name = signal.Signals(signum_of(e)).name
            rd.write_meta(complete=False, interrupted=name)
            raise Interrupted(f"interrupted by {name}: history kept in {rd.path}", signum_of(e)) from None
        except Exception as e:
            rd.write_meta(complete=False, error=f"{type(e).__name__}: {e}")
            raise
    test.checker.print(verdict)
    anomalies = sorted(getattr(verdict, "anomalies", {}) or {})
    return RunOutcome(rd.path, verdict.exit_code, verdict.valid, anomalies, list(verdict.bad_error_types))


def run(test: Test, *, progress: bool = True, say: Callable[[str], None] = _stderr,
        check: bool = True) -> RunOutcome:
    """Every phase of one run. With `check=False` the run stops after its history, dumps and logs are
    stored (`complete: true`) and is left for the caller to judge with others in one job (`chaos
    nightly`); its outcome is then "unchecked"."""
    if check and (note := getattr(test.checker, "announce", lambda: None)()):
        say(note)  # once, at the start: what this run's check will not look for
    if test.spec.provisioner == "sim":
        return run_simulated(test, say, check=check)
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect chatter during partitions is expected
    with stop_signals(), recording(test, say) as rec:
        try:
            with provisioned(test, rec) as cluster, deployed(test, cluster, rec) as db:
                with armed(test, cluster, db, rec) as nemesis:
                    pool = recorded(test, cluster, db, nemesis, rec, progress=progress)
                    recovered = healed(test, db, nemesis, rec)
                drain_complete = drained(pool, rec)
                collected(cluster, db, rec)
            rec.enter("check")
            rec.history.close()
            rec.rd.write_meta(complete=True, recovered=recovered, drained=drain_complete,
                              worker_errors=pool.errors, ops=dict(rec.history.counts))
            if not check:
                rec.enter("done")
                return RunOutcome(rec.path, 0, "unchecked", [])
            verdict = test.checker.check(rec.path)
            rec.enter("done")
        except KeyboardInterrupt as e:
            signum = signum_of(e)
            name = signal.Signals(signum).name
            rec.rd.write_meta(complete=False, interrupted=name, stopped_in=rec.phase)
            raise Interrupted(f"interrupted by {name} during {rec.phase}: faults healed, nodes torn down, "
                              f"history kept in {rec.path}", signum) from None
        except ChaosError as e:
            rec.rd.write_meta(complete=False, error=str(e), stopped_in=rec.phase)
            raise
        except Exception as e:
            rec.rd.write_meta(complete=False, error=f"{type(e).__name__}: {e}", stopped_in=rec.phase)
            raise
    test.checker.print(verdict)
    anomalies = sorted(getattr(verdict, "anomalies", {}) or {})
    return RunOutcome(rec.path, verdict.exit_code, verdict.valid, anomalies, list(verdict.bad_error_types))
