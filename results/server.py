"""The check server: one warm Spark driver that `chaos check` processes share, through Spark Connect.

Why: a fresh `chaos check` process used to pay for a whole Spark driver before it read a row — the JVM,
the session, the first query's planning and compiling, a large share of a 10^4-op check
(docs/measurements/check.md, "Figures first recorded in code comments"). Spark's own
answer to "many short clients, one warm driver" is Spark Connect: the driver runs the Connect service
(`SparkConnectPlugin`), and clients talk to it over gRPC with a light Python client. So the first
`chaos check` starts a server on loopback, in a process of its own (`python -m results.server`), and
every later one connects to it; the server stops itself after `CHAOS_CHECK_SERVER_IDLE` seconds
(default 600) with no check. Each client has its own Connect session, so two checks at once keep
their own views, settings and tables.

Who asks: `chaos check`, the checks of `chaos run`, `replay`, `nightly` and `detect` on the default
master (`results.checker.KafkaChecker`), which start it while the run's cluster comes up, so a
night's or a `--test-count`'s checks all find it warm, and `chaos sim-search`'s batches on one host.

What the files say (`$CHAOS_CHECK_SERVER_DIR`, default `$CHAOS_CACHE_DIR/check-server/`, mode 0700;
the test suite gives its session a directory of its own):
- `server.json`: pid, port, token and the versions it runs; written once the service answers,
  removed when it stops. The token (random, per server) is what a client must present: it is passed
  to the JVM in its environment, never on a command line another user could read;
- `used`: its modification time is the idle clock: every client touches it every `TICK_S` while it
  lives, so the server stops only `CHAOS_CHECK_SERVER_IDLE` seconds after the last client ended;
- `server.log`: the driver JVM's and this module's output.

A server that cannot be started or reached is never a failed check: the check runs in its own
process as before (`session` returns None and says why in the log). `--spark-master` (a real cluster),
`chaos check --no-server` and `CHAOS_CHECK_SERVER=0` keep the check in-process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kernel.errors import EnvironmentProblem
from results.background import Task

log = logging.getLogger(__name__)

#: how long the first check waits for a server it started (JVM, session, Connect service)
START_TIMEOUT_S = 90.0
#: how often the server looks at its idle clock
TICK_S = 2.0
#: how long a client waits for a running server's first answer (it answers in milliseconds, even
#: while it runs another client's jobs: Connect serves each request on a thread of its own)
FIRST_ANSWER_S = 15.0


def idle_s() -> float:
    """Seconds without a check after which the server stops (`CHAOS_CHECK_SERVER_IDLE`, default 600)."""
    try:
        return max(5.0, float(os.environ.get("CHAOS_CHECK_SERVER_IDLE", "600")))
    except ValueError:
        return 600.0


def enabled() -> bool:
    return os.environ.get("CHAOS_CHECK_SERVER", "1") not in ("0", "", "false", "no")


def home() -> Path:
    if os.environ.get("CHAOS_CHECK_SERVER_DIR"):
        return Path(os.environ["CHAOS_CHECK_SERVER_DIR"])
    from results.jvm import cache_dir

    return cache_dir() / "check-server"


@dataclass(frozen=True)
class ServerState:
    pid: int
    port: int
    token: str
    versions: str  # pyspark's and Python's: a client of another install starts its own server
    started: float

    def url(self) -> str:
        # "localhost" (not 127.0.0.1): the client then uses gRPC's local credentials with the token,
        # not TLS, which the server does not speak
        return f"sc://localhost:{self.port}/;token={self.token}"


def versions() -> str:
    import pyspark

    return f"pyspark {pyspark.__version__}, {sys.executable}"


def read_state(where: Path | None = None) -> ServerState | None:
    path = (where or home()) / "server.json"
    try:
        data = json.loads(path.read_text())
        return ServerState(int(data["pid"]), int(data["port"]), str(data["token"]), str(data["versions"]),
                           float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def alive(pid: int) -> bool:
    """Whether `pid` is a check server of ours: a live process running this module. A pid in a stale
    `server.json` may belong to some other process by now, which must be neither used nor killed."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"results.server" in cmdline and b"serve" in cmdline


def touch(where: Path | None = None) -> None:
    """Reset the idle clock: a client is alive (its heartbeat calls this every few seconds)."""
    used = (where or home()) / "used"
    with contextlib.suppress(OSError):
        used.touch()


@contextlib.contextmanager
def _locked(where: Path) -> Iterator[None]:
    """One process at a time decides whether to start a server (two first checks at once share one)."""
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(where / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --- the client side -----------------------------------------------------------------------------------


class _Unresponsive(Exception):
    """A running server that did not answer the first call in time."""

    def __init__(self, state: ServerState) -> None:
        super().__init__(f"server {state.pid} did not answer")
        self.state = state


def session() -> Any | None:
    """A Spark Connect session on the shared server (started first when none runs), or None when
    there is none to be had — the caller then starts Spark in its own process. A server that runs
    but does not answer is an `EnvironmentProblem`: the user has to end it."""
    if not enabled():
        return None
    where = home()
    try:
        with _locked(where):
            state = read_state(where)
            if state is not None and (not alive(state.pid) or state.versions != versions()):
                if alive(state.pid):
                    stop(where)  # another install's server: ours replaces it (stop removes its state)
                else:
                    (where / "server.json").unlink(missing_ok=True)
                state = None
            if state is None:
                state = _start(where)
        warm = _used_since(where, state)
        touch(where)
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.client.retries import DefaultPolicy

        # its "retries exceeded" is a Python warning on the terminal; the sentence of spark_problem says it
        warnings.filterwarnings("ignore", category=UserWarning, module="pyspark.sql.connect.client.retries")
        spark = SparkSession.builder.remote(state.url()).getOrCreate()
        # a server that is gone is said within seconds (Spark's default retries for ten minutes)
        spark.client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=2000)])
        # one round trip: the server answers and takes the token. A server that is alive but does not
        # answer (stopped by SIGSTOP, hung) still accepts the connection, and gRPC would wait for its
        # answer for ever. Past the deadline the check cannot fall back to its own driver either: a
        # gRPC call still waiting in this process makes the JVM's launch (a fork) abort
        probe = Task(partial(spark.conf.get, "spark.app.name"), "check-server-probe")
        if not probe.ended_within(FIRST_ANSWER_S):
            with contextlib.suppress(Exception):  # closed by us, the client sends nothing more at exit
                spark.client.close()  # (its release call would wait on the silent server again)
            raise _Unresponsive(state)
        probe.result()
        _heartbeat(where)
        if warm:  # an earlier check compiled every query's classes in that JVM (`results.frames`)
            from results.frames import classes_cached

            classes_cached(True)
    except _Unresponsive as e:
        raise EnvironmentProblem(
            f"the shared check server (pid {e.state.pid}, port {e.state.port}) accepts connections but has not "
            f"answered for {FIRST_ANSWER_S:g} s (stopped or hung?); end it with `chaos check-server stop`, or "
            "check with --no-server; nothing was judged") from None
    except Exception as e:  # noqa: BLE001 - any failure here only means "check in-process"
        log.info("the shared check server is not available (%s: %s); checking in this process",
                 type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
        return None
    return spark


def _heartbeat(where: Path) -> None:
    """Keep the idle clock at zero while this client lives: a check's planning and its Python-side
    steps run no Spark job for seconds at a time, and the server must not leave in the middle."""

    def beat() -> None:
        while True:
            touch(where)
            time.sleep(TICK_S)

    threading.Thread(target=beat, name="check-server-heartbeat", daemon=True).start()


def _used_since(where: Path, state: ServerState) -> bool:
    """Whether a check has used the server since it started (the idle clock moved after its start)."""
    try:
        return (where / "used").stat().st_mtime > state.started + 1.0
    except OSError:
        return False


def _start(where: Path) -> ServerState:
    """Start a server in a process of its own (a new session: a Ctrl-C of this check does not reach
    it) and wait until it has written its state."""
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    logf = open(where / "server.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen([sys.executable, "-m", "results.server", "serve"], stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=logf, start_new_session=True, cwd=str(Path(__file__).parents[1]))
    finally:
        logf.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        state = read_state(where)
        if state is not None and state.pid == proc.pid:
            return state
        if proc.poll() is not None:
            raise RuntimeError(f"the check server exited at start (code {proc.returncode}); see {where / 'server.log'}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the check server did not come up within {START_TIMEOUT_S:.0f} s; see {where / 'server.log'}")


def stop(where: Path | None = None, timeout: float = 30.0) -> ServerState | None:
    """Stop the server (SIGTERM, then SIGKILL after `timeout`); the state it had, or None."""
    where = where or home()
    state = read_state(where)
    if state is None:
        return None
    if alive(state.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGTERM)
            os.killpg(state.pid, signal.SIGCONT)  # a stopped server (SIGSTOP) handles its TERM now
        deadline = time.monotonic() + timeout
        while alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(state.pid):  # its JVM too: the server leads its own process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(state.pid, signal.SIGKILL)
    (where / "server.json").unlink(missing_ok=True)
    return state


# --- the server side -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(where: Path | None = None) -> int:
    """The server process: a Spark driver with the Connect service on loopback, until idle."""
    from results.spark import get_spark

    where = where or home()
    # the first client may be a run's warm-up thread, which lowers its own priority for the workload's
    # sake (`results.warm`), and a child inherits it: a server shared by every later check takes the
    # normal priority back where this process may (root, CAP_SYS_NICE), before its JVM inherits it
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    token = secrets.token_urlsafe(24)
    os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token  # the JVM inherits it; never on a command line
    port = _free_port()
    conf = {
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        # a client that died without releasing its session frees its tables after this long
        "spark.connect.session.manager.defaultSessionTimeout": "10min",
        "spark.app.name": "chaos-check-server",
    }
    stopping = False

    def on_term(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    # a long-lived driver: C2 pays off over many checks (expected_bytes above results.spark.SMALL_BYTES)
    spark = get_spark(None, 1 << 40, log_to=where / "server.log", extra_conf=conf)
    state = ServerState(os.getpid(), port, token, versions(), time.time())
    tmp = where / "server.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(state), f)
    os.replace(tmp, where / "server.json")
    touch(where)
    log.warning("check server %d listening on 127.0.0.1:%d; stops after %.0f s idle", os.getpid(), port, idle_s())
    try:
        tracker = spark.sparkContext.statusTracker()
        while not stopping:
            time.sleep(TICK_S)
            try:
                quiet = time.time() - (where / "used").stat().st_mtime
            except OSError:
                quiet = idle_s() + 1
            if quiet > idle_s() and not tracker.getActiveJobsIds():
                log.warning("check server %d: idle for %.0f s, stopping", os.getpid(), quiet)
                break
    finally:
        current = read_state(where)
        if current is not None and current.pid == os.getpid():
            (where / "server.json").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
        sys.exit(serve())
    sys.exit("usage: python -m results.server serve")
