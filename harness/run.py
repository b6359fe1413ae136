"""`run(test)`: one chaos run, start to finish, as nested phases (see `phases.py`) — the same phases
for containers, the simulator and `chaos sim-search`, so one test.json writer serves them all.

    recording                  the run directory, test.json (complete: false) and the history
      provisioned              nodes up; down at the end (unless --leave-running)
        deployed               the system under test (ours: ZooKeeper + brokers), the topic; torn down
          armed                the fault schedule; every fault healed on the way out
            recorded           workers and nemesis for the time limit
            healed             heal, then wait until the cluster is whole again (`kernel.db.recovered`)
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

from harness.client_log import client_log
from harness.phases import armed, collected, deployed, drained, healed, provisioned, recorded, recording, warming
from harness.signals import signum_of, stop_signals
from kernel.db import HasReplicaDumps
from kernel.errors import ChaosError, Interrupted
from kernel.nemesis import PlannedFault
from kernel.test import Test

log = logging.getLogger(__name__)
#: the checkers' start-of-run notes already said in this process (`run`)
_ANNOUNCED: set[str] = set()


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    valid: Any
    anomalies: list[str]
    bad: list[str] = field(default_factory=list)


def _stderr(line: str) -> None:
    print(f"chaos: {line}", file=sys.stderr)


def phase_line(test: Test, phase: str) -> str | None:
    """The one line `chaos run` prints as it enters `phase` (None: a phase it does not announce)."""
    s = test.spec
    fams = ", ".join(s.nemesis) if len(s.nemesis) <= 3 else f"{len(s.nemesis)} fault families"
    return {
        "provision": f"provisioning {s.nodes} nodes ({s.provisioner}, cluster {s.cluster})",
        "deploy": f"{test.system.deploy_line(s) if test.system else 'starting the brokers'}; topic {s.topic}: "
                  f"{s.partitions} partitions, "
                  f"replication factor {s.replication_factor}",
        "workload": f"running the {s.workload} workload for {s.time_limit:g} s under {fams}",
        "heal": "healing every fault and waiting for the cluster to recover",
        "drain": "draining: reading every partition to its end",
        "collect": "collecting replica dumps and node logs" if isinstance(test.db, HasReplicaDumps)
                   else "collecting node logs",
        "check": "checking the history",
    }.get(phase)


def run(test: Test, *, progress: bool = True, say: Callable[[str], None] = _stderr, check: bool = True,
        faults: list[PlannedFault] | None = None, extra_meta: dict[str, Any] | None = None,
        narrate: bool = False) -> RunOutcome:
    """Every phase of one run, on whichever backend the test carries (containers or the simulator).
    With `check=False` the run stops after its history, dumps and logs are stored (`complete: true`)
    and is left for the caller to judge (`chaos nightly` with others in one job, `chaos sim-search`
    with its screen); its outcome is then "unchecked". `faults`: a schedule to play instead of the
    seed's (a shrunk one; `extra_meta` then says so in test.json). `narrate`: one line per phase
    through `say` (`chaos run`'s console). A checker that can warm up is started once the nodes exist
    (`warming`), so its session is ready when the run ends."""
    if check and (note := getattr(test.checker, "announce", lambda: None)()) and note not in _ANNOUNCED:
        _ANNOUNCED.add(note)  # once, at the start: what this run's check will not look for; once per
        say(note)  # process, so `chaos detect`, `--test-count` and a night do not repeat it every run
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect chatter during partitions is expected
    with stop_signals(), recording(test, say) as rec:
        if narrate:
            def announce(phase: str) -> None:
                if (line := phase_line(test, phase)) is not None:
                    say(line)

            rec.on_phase = announce
        if extra_meta:
            rec.rd.write_meta(**extra_meta)
        try:
            with client_log(rec.path), provisioned(test, rec) as cluster, warming(test, rec, check), \
                    deployed(test, cluster, rec) as db:
                with armed(test, cluster, db, rec, faults) as nemesis:
                    pool = recorded(test, cluster, db, nemesis, rec, progress=progress)
                    recovered = healed(test, db, nemesis, rec)
                drain_complete = drained(test, pool, db, rec, nemesis.faults)
                collected(cluster, db, rec)
            rec.enter("check")
            rec.history.close()
            rec.rd.write_meta(complete=True, recovered=recovered, drained=drain_complete,
                              worker_errors=pool.errors, ops=dict(rec.history.counts), **test.runtime.facts())
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
