"""A warm check when the run ends: the Spark session, and one tiny check through every query,
started in the background while the workload runs.

Why: after the workload, heal, drain and collection, a cold check first waits for the driver JVM
(seconds: the JVM, Spark's classes, the session) and then compiles every query of every checker on
its first use (Spark's whole-stage code generation, the JIT). None of that depends on the history,
so it can happen while the workload runs: a tiny built-in history is checked through the same code
(`check_runs`, nothing written), which leaves the session up and Spark's generated classes cached
(Spark keys them by their source, the same for any history), so the run's own check pays only for
its data. The tiny check runs with generated code on purpose, and once it passed the run's check uses
generated code at any size (`frames.classes_cached`): interpreting wins only where compiling is
still to be paid.

Low priority: the warm-up thread lowers its own scheduling priority (nice 10) before it starts the
JVM, which inherits it, so the workload's clients and the nodes keep the CPU they need on a small
machine. When the check begins, `finish` puts the JVM's threads back to normal priority (where the
process may: root, or CAP_SYS_NICE; else the check runs niced, on a machine that is quiet by then)
and waits for the warm-up to end. A warm-up that fails is only logged: the check starts its own
session and says what is wrong as any check would.

On the shared check server (`results.server`, where a run on the default master checks) the session
is a Spark Connect client and there is no JVM here to start or renice. A server that already served a
check has every query's classes compiled, so the tiny check is skipped; a server this warm-up had to
start gets the tiny check, which compiles them in its JVM for every later check too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

#: the warm-up thread's nice value (inherited by the JVM it starts)
NICE = 10


def _tiny_run(path: Path) -> None:
    """A run directory: sends and polls on two keys, a transaction, an info op and two replica dumps,
    so every checker's query gets rows."""
    ops: list[dict[str, object]] = []

    def op(proc: int, typ: str, f: str, value: object) -> None:
        ops.append({"index": len(ops), "time": len(ops) * 1000, "process": proc, "type": typ, "f": f,
                    "value": value})

    for k in (0, 1):
        for v in range(1, 4):
            op(0, "invoke", "send", [["send", k, v]])
            op(0, "ok", "send", [["send", k, [v - 1, v]]])
    op(1, "invoke", "txn", [["send", 0, 9], ["poll"]])
    op(1, "ok", "txn", [["send", 0, [3, 9]], ["poll", {"1": [[0, 1], [1, 2]]}]])
    op(2, "invoke", "send", [["send", 1, 7]])
    op(2, "info", "send", [["send", 1, 7]])
    op(3, "invoke", "poll", [["poll"]])
    op(3, "ok", "poll", [["poll", {"0": [[0, 1], [1, 2], [2, 3], [3, 9]], "1": [[0, 1], [1, 2], [2, 3]]}]])
    path.mkdir(parents=True, exist_ok=True)
    (path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    # two replicas of key 0, so the replica dumps' reader and the divergence check are compiled too
    for node in ("n1", "n2"):
        (path / "replicas" / node).mkdir(parents=True, exist_ok=True)
        recs = [{"topic": "chaos", "partition": 0, "hw": 4, "leo": 4, "log_start_offset": 0,
                 "leader_epochs": [[0, 0]]}]
        recs += [{"offset": o, "epoch": 0, "value": str(v), "key": None, "crc": 0, "timestamp": 0}
                 for o, v in enumerate((1, 2, 3, 9))]
        (path / "replicas" / node / "chaos-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


class WarmUp:
    """One background warm-up: `start` at the workload's start, `finish` when the check begins."""

    def __init__(self, spark_master: str | None, log_to: Path) -> None:
        self.spark_master = spark_master
        self.log_to = log_to
        self.error: str | None = None
        self.valid: object = None  # the tiny run's verdict (True: every query ran)
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._run, name="check-warm-up", daemon=True)
        self._tid: int | None = None
        self._hurry = threading.Event()  # the check is waiting: normal priority, no tiny check

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        t0 = time.monotonic()
        self._tid = threading.get_native_id()
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self._tid, NICE)
            if self._hurry.is_set():  # `finish` came between: it may have missed this thread
                os.setpriority(os.PRIO_PROCESS, self._tid, 0)
        try:
            from results import frames
            from results.check import check_runs
            from results.spark import get_spark

            get_spark(self.spark_master, log_to=self.log_to)
            if self._hurry.is_set():  # the run ended first: the check itself warms the rest up
                _renice_jvm(0)
                return
            if frames.classes_are_cached():  # a warm shared server's session: an earlier check compiled them
                self.valid = True
            else:
                # the tiny check compiles every query's classes (a cold compile costs seconds, paid here
                # while the workload runs), and then the run's own check uses them whatever its size
                frames.classes_cached(True)
                try:
                    with tempfile.TemporaryDirectory(prefix="chaos-warm-") as tmp:
                        run = Path(tmp) / "run"
                        _tiny_run(run)
                        got = check_runs([run], spark_master=self.spark_master, elle_cli=None, write=False,
                                         perf=False, keep_going=False)[0]
                        self.valid = getattr(got, "valid", None)
                finally:
                    frames.classes_cached(self.valid is True)
            # what the check phase imports after the jobs: the perf facts (pandas) and the plots and
            # report (matplotlib, the templates' engine), which cost the check phase time when imported
            # then (docs/measurements/check.md, "2026-11-29: the warm-up imports what the check phase
            # imports")
            import results.perf  # noqa: F401
            import results.present  # noqa: F401
        except Exception as e:  # the check will meet the same problem and say it properly
            self.error = f"{type(e).__name__}: {e}"
            log.info("warming the check up failed: %s", self.error)
        finally:
            self.seconds = time.monotonic() - t0

    def join(self) -> None:
        """Wait for the whole warm-up, tiny check included, without hurrying it (tests, benchmarks)."""
        self._thread.join()

    def finish(self) -> float:
        """Normal priority for the warm-up thread and the JVM, then wait for the warm-up; the seconds
        waited. A warm-up still starting the session (a short workload, a busy machine) finishes that
        at normal priority and skips its tiny check: at nice 10 on a loaded machine it could take
        longer than a cold check."""
        self._hurry.set()
        if self._tid is not None:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, self._tid, 0)
        _renice_jvm(0)
        t0 = time.monotonic()
        if self._thread.ident is not None:  # started
            self._thread.join()
        return time.monotonic() - t0


def _renice_jvm(nice: int) -> None:
    """Every thread of this process's driver JVM to `nice` (Linux sets priority per thread)."""
    try:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None) if SparkContext._gateway else None
        if proc is None:
            return
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)
            except ProcessLookupError:
                continue  # a thread that ended meanwhile
            except PermissionError:
                return  # not allowed to raise priority here: the check runs niced
    except (OSError, ImportError):
        pass


_current: WarmUp | None = None


def start(spark_master: str | None, log_to: Path) -> None:
    """Begin warming this process's check up (once; a second call while one runs does nothing)."""
    global _current
    if _current is None:
        _current = WarmUp(spark_master, log_to)
        _current.start()


def finish() -> float:
    """Wait for the warm-up begun by `start`, if any; the seconds waited (0 without one)."""
    global _current
    w, _current = _current, None
    return w.finish() if w is not None else 0.0
