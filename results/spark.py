"""One SparkSession per process, configured for small local jobs by default.

Starting a session costs seconds, so it is created once and reused (tests share it through a
session fixture). `--spark-master URL` points the same code at a real cluster.

The driver JVM maps a class-data-sharing archive of Spark's classes (`results.jvm`). Its JIT is
chosen by how much the process will check, when the caller knows (`expected_bytes`): below
`SMALL_BYTES` the JVM compiles with C1 only — a check of a small history finishes before C2's
optimised code would pay for compiling it, and on two cores C2's compiler threads take the CPU
the check needs (a fresh 10^4-op check took about half as long with C1 only); above it, C2, which
pays for itself on a long check (docs/measurements/check.md, "Figures first recorded in code
comments"). Unknown (a nightly, the tests): small, as most runs are.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from kernel.errors import EnvironmentProblem, UsageError

_lock = threading.Lock()
_session: Any = None
_master: str | None = None


#: bytes of history below which a process's JVM runs C1-compiled code only
SMALL_BYTES = 32 << 20
#: generated classes a session keeps compiled (`spark.sql.codegen.cache.maxEntries`)
CODEGEN_CACHE = 1000


def verbose() -> bool:
    """`chaos -v`: tools' own output on the terminal too (`CHAOS_VERBOSE`, set by the flag)."""
    return os.environ.get("CHAOS_VERBOSE", "") not in ("", "0")


def default_log() -> Path:
    """Where a driver JVM started outside a run writes: the cache directory's spark.log."""
    from results.jvm import cache_dir

    return cache_dir() / "spark.log"


def _launch(conf: dict[str, str], log_to: Path | None) -> None:
    """Start the driver JVM ourselves, its stdout and stderr into `log_to` (the run's spark.log; else
    `default_log()`), so the terminal keeps our own sentences only: the launcher's "Using incubator
    modules", Spark's log4j banner, the NativeCodeLoader warning and any stack trace Spark prints all
    land in that file (`chaos -v` leaves them on the terminal). The JVM writes to its own fd 2, which
    no Python-side logging setting reaches; pyspark's `launch_gateway` takes the Popen arguments.
    A JVM that does not come up is this machine's Java or Spark, not our bug: said with its last line."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False)
    for k, v in conf.items():
        spark_conf.set(k, v)
    where = None if verbose() else (log_to or default_log())
    out: Any = None
    if where is not None:
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            out = open(where, "ab")  # noqa: SIM115 - the JVM holds it for its whole life
        except OSError:
            out = subprocess.DEVNULL  # no place for its chatter: it is dropped, never shown
    try:
        gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": out, "stderr": out} if out else None)
    except Exception as e:  # the JVM did not come up
        if "JAVA_GATEWAY_EXITED" not in str(e) and "Java gateway process exited" not in str(e):
            raise
        said = _last_line(where) if where is not None else ""
        raise EnvironmentProblem("the Spark driver JVM did not start" + (f" ({said})" if said else "")
                                 + (f"; its output is in {where}" if where is not None else "")
                                 + "; check the Java runtime (JAVA_HOME) and --spark-master") from None
    finally:
        if out is not None and out is not subprocess.DEVNULL:
            out.close()  # the JVM has its own copy of the descriptor
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def driver_memory() -> str:
    """The driver JVM's heap: `$CHAOS_SPARK_DRIVER_MEMORY`, else 1400m."""
    return os.environ.get("CHAOS_SPARK_DRIVER_MEMORY", "1400m")


def is_remote(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (`results.server`): no JVM of ours behind it."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def jvm_alive(spark: Any) -> bool:
    """Whether the session's JVM still answers. An OutOfMemoryError in a task kills the whole driver
    JVM in local mode, and every later call fails with a refused connection that names nothing."""
    try:
        if is_remote(spark):
            spark.conf.get("spark.app.name")  # a round trip to the shared server's driver
        else:
            spark.sparkContext._jvm.java.lang.System.nanoTime()
    except Exception:
        return False
    return True


def spark_problem(spark: Any, cause: BaseException) -> str | None:
    """The sentence for an error of a Spark call that no retry in this process can get past, or None.
    The driver ran out of memory: a task's OutOfMemoryError (in local mode the JVM exits a moment
    later, so asking it at once may still get an answer) or execution memory it could not get; or
    the JVM no longer answers."""
    text = str(cause)
    if "OutOfMemoryError" in text or "UNABLE_TO_ACQUIRE_MEMORY" in text:
        why = "the Spark driver ran out of memory during the check"
    elif not jvm_alive(spark):
        if is_remote(spark):
            from results.server import home

            code = re.search(r"StatusCode\.(\w+)", text)
            return (f"the shared check server stopped answering during the check (gRPC "
                    f"{code.group(1) if code else type(cause).__name__}); its log is {home() / 'server.log'}; "
                    "check again (a new one starts), or with --no-server; nothing was judged")
        first = text.splitlines()[0][:160] if text else ""
        why = f"the Spark driver JVM died during the check ({type(cause).__name__}: {first})"
    else:
        return None
    return (f"{why}; give it more heap (CHAOS_SPARK_DRIVER_MEMORY, {driver_memory()} when this process started it) "
            "or check fewer runs at once; nothing was judged")


#: the master URLs Spark accepts (SparkContext's and spark-submit's forms)
MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn|k8s://\S+"
                    r"|spark://[^\s/,:]+(:\d+)?(,[^\s/,:]+(:\d+)?)*")


def check_master(master: str | None) -> None:
    """Refuse a master URL Spark cannot parse before anything starts (a usage error: the JVM would
    only exit with a stack trace, which used to end as a harness bug)."""
    want = master or os.environ.get("CHAOS_SPARK_MASTER")
    if want and not MASTER.fullmatch(want):
        where = "--spark-master" if master else "CHAOS_SPARK_MASTER"
        raise UsageError(f"{where} {want!r} is not a Spark master URL (local[*], local[N], spark://HOST:PORT, "
                         "yarn or k8s://...)")


def check_java() -> None:
    """The Spark driver needs a Java runtime: $JAVA_HOME/bin/java when JAVA_HOME is set (spark-class
    takes that one), else java on PATH. A missing one is this machine's problem, said as such."""
    home = os.environ.get("JAVA_HOME")
    if home:
        if not (Path(home) / "bin" / "java").is_file():
            raise EnvironmentProblem(f"JAVA_HOME={home} holds no bin/java, and the Spark check needs a Java 17 "
                                     "runtime: point JAVA_HOME at one, or unset it to use the java on PATH")
    elif shutil.which("java") is None:
        raise EnvironmentProblem("no java on PATH, and the Spark check needs a Java 17 runtime "
                                 "(Debian: openjdk-17-jre-headless); install one or set JAVA_HOME")


#: set by `chaos check` (`use_server`): its session comes from the shared check server when it can
_shared = False


def use_server(on: bool) -> None:
    """Whether this process's session is a client of the shared check server (`results.server`) when
    it checks on the default local master; else (and when no server can be had) it starts its own."""
    global _shared
    _shared = on


def get_spark(master: str | None = None, expected_bytes: int | None = None, log_to: Path | None = None,
              executor_java: tuple[str, ...] = (), extra_conf: dict[str, str] | None = None) -> Any:
    """The process's SparkSession (created on first use); `master` defaults to local[*].
    `expected_bytes`: how much history this process is about to check (sets the JIT, see above).
    `log_to`: the file the driver JVM writes its output to when this call starts it (see `_launch`).
    `executor_java`: options of a cluster's executor JVMs (`spark.executor.extraJavaOptions`, with the
    user's own from `CHAOS_SPARK_EXECUTOR_JAVA_OPTIONS` after them), for a caller that knows what its
    executors will do; they take effect when this call creates the session. `extra_conf`: more settings
    for a session this call creates (the check server's Connect service)."""
    global _session, _master
    want = master or os.environ.get("CHAOS_SPARK_MASTER") or "local[*]"
    with _lock:
        if _shared and want == "local[*]" and _session is None:
            from results import server

            remote = server.session()
            if remote is not None:
                _session, _master = remote, want
                atexit.register(_release, remote)
                return remote
        if _session is not None and not jvm_alive(_session):
            # pyspark cannot start a second driver JVM in this process: say so, do not fail later
            # with a refused connection that names nothing
            raise EnvironmentProblem("the Spark driver JVM of this process died earlier (see above); "
                                     "start the command again to check with a new one")
        if _session is not None and _master == want:
            return _session
        if _session is not None:
            _session.stop()
        check_master(want)
        check_java()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # executors run this very Python (the venv with our packages); "python3" from PATH was another
        # interpreter, and since the variable is inherited, every child process (a sim-search on
        # Spark started from a process that had checked before) sent its tasks there
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        import pyspark
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        # spark-submit otherwise starts another Python just to find it
        os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))

        from results.jvm import DriverJvm, driver_jvm, finish_dump_at_exit

        # options reach the JVM only when this process starts it (a restarted session reuses it)
        # the serial collector always (no GC threads competing with the check for two cores; every
        # figure of docs/measurements/check.md was measured with it); a small check also
        # compiles with C1 only (C2's compile threads cost more than they win there), a large one
        # keeps C2, which pays off over a long job (the module's docstring)
        small = expected_bytes is None or expected_bytes < SMALL_BYTES
        jit = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1") if small else ("-XX:+UseSerialGC",)
        jvm = driver_jvm(jit) if SparkContext._gateway is None else DriverJvm(())
        conf = {
            "spark.app.name": "chaos-check",
            "spark.master": want,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions":
                os.environ.get("CHAOS_SPARK_PARTITIONS", "2" if want.startswith("local") else "64"),
            "spark.sql.adaptive.enabled": "false" if want.startswith("local") else "true",
            # a 1.4 GB heap keeps the driver JVM under 2 GB resident on a 10^7-op history; with 2 GB of
            # heap it went over, at the same speed, as Spark spills its sorts (docs/measurements/check.md,
            # "2026-11-25: before them")
            "spark.driver.memory": driver_memory(),
            "spark.sql.ansi.enabled": "false",
            # perf/latency.parquet is one row per op: move it to pandas as Arrow batches, not pickled rows
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            # the checks' generated classes: Spark keeps 100, fewer than one check compiles, so every
            # check compiled most of them again (Janino, ~15 % of a warm check's CPU in a profile)
            "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE),
            # the keyed table's checkpoint, when it is on disk, is read by every check: Java's
            # serialization of its rows was a fifth of a warm check's CPU; Kryo's is a fraction of that
            "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        }
        conf.update(extra_conf or {})
        if jvm.options:
            conf["spark.driver.extraJavaOptions"] = jvm.java_options
        # Spark applies them wherever executors are JVMs of their own (a cluster, local-cluster[...]) and
        # ignores them in local[*], whose executors are threads of the driver's JVM
        executor = " ".join((*executor_java, *os.environ.get("CHAOS_SPARK_EXECUTOR_JAVA_OPTIONS", "").split()))
        if executor:
            conf["spark.executor.extraJavaOptions"] = executor
        if SparkContext._gateway is None:
            _launch(conf, log_to)
        builder = SparkSession.builder
        for k, v in conf.items():
            builder = builder.config(k, v)
        _session = builder.getOrCreate()
        finish_dump_at_exit(jvm, _session)
        _session.sparkContext.setLogLevel("ERROR")
        _master = want
        return _session


def _release(remote: Any) -> None:
    """At exit: give the shared server this client's session back (its tables, views and settings).
    The idle clock needs no touch here: the heartbeat kept it fresh to the end."""
    with contextlib.suppress(Exception):  # the server may already be gone; nothing of ours is lost
        remote.stop()
