"""Start-up options for the Spark driver's JVM: a class-data-sharing archive of Spark's classes.

Why: a fresh `chaos check` spends seconds before its first row is read, loading, parsing and
verifying the ~11,500 classes of Spark, Hadoop, Netty and Scala that a session and its first job
touch. Java's class-data sharing (CDS) maps classes that were already parsed and verified from an
archive instead (most of them; session start is markedly shorter with it: docs/measurements/check.md,
"2026-11-25: after the start-up work").
The archive is machine-specific (it depends on the exact JVM, the exact jars and
some JVM options), so it is not shipped: the first session on a machine writes it when it exits
(`-XX:ArchiveClassesAtExit`), every later one maps it (`-XX:SharedArchiveFile`).

Safety: the archive's name is a hash of everything it depends on — the JVM binary, pyspark's
version and jars, and the options — so a new JVM or pyspark simply gets a new archive. The JVM
also checks the archive itself and runs without it, silently, when it does not match. The dump
goes to a temporary name and is renamed only after the JVM has exited cleanly, so a reader never
sees half an archive; two first sessions at once each write their own and the last rename wins.
`CHAOS_CDS=0` turns the archive off. Where it goes: `$CHAOS_CACHE_DIR`, else `$XDG_CACHE_HOME/chaos`,
else `~/.cache/chaos`.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the dump lists every class it cannot archive (signed jars, generated code) as a warning
QUIET = "-Xlog:cds*=off"


@dataclass(frozen=True)
class DriverJvm:
    """The driver JVM's extra options, and the archive this process writes at exit (or None)."""

    options: tuple[str, ...]
    dump_to: Path | None = None
    archive: Path | None = None

    @property
    def java_options(self) -> str:
        return " ".join(self.options)


def cache_dir() -> Path:
    if os.environ.get("CHAOS_CACHE_DIR"):
        return Path(os.environ["CHAOS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "chaos"


def _java() -> Path | None:
    """The java that `spark-class` will run: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _fingerprint(options: tuple[str, ...]) -> str | None:
    """A hash of what the archive depends on; None when something cannot be read (then no CDS)."""
    java = _java()
    if java is None:
        return None
    try:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
        h = hashlib.sha256()
        h.update(f"{java}\0{pyspark.__version__}\0{jars}\0{' '.join(options)}\0".encode())
        for lib in sorted(java.parent.parent.glob("lib/server/libjvm.so")):
            st = lib.stat()
            h.update(f"{lib}:{st.st_size}:{st.st_mtime_ns}\0".encode())
        for jar in sorted(os.scandir(jars), key=lambda e: e.name):
            st = jar.stat()
            h.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}\0".encode())
    except (OSError, ImportError):
        return None
    return h.hexdigest()[:16]


def driver_jvm(extra: tuple[str, ...] = ()) -> DriverJvm:
    """Options for a new driver JVM: map the archive when it exists, else write it at exit.
    `CHAOS_SPARK_JAVA_OPTIONS` adds options of the user's (each set of options has its own archive)."""
    options = (*extra, *os.environ.get("CHAOS_SPARK_JAVA_OPTIONS", "").split())
    if os.environ.get("CHAOS_CDS", "1") in ("0", "false", "no", ""):
        return DriverJvm(options)
    key = _fingerprint(options)
    where = cache_dir()
    if key is None or " " in str(where):
        return DriverJvm(options)
    archive = where / f"spark-{key}.jsa"
    if archive.is_file():
        _touch(archive)
        return DriverJvm((*options, f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", QUIET), None, archive)
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError:
        return DriverJvm(options)
    if not os.access(where, os.W_OK):
        return DriverJvm(options)
    _forget_abandoned(where)
    tmp = where / f".spark-{key}.{os.getpid()}.jsa.tmp"
    return DriverJvm((*options, f"-XX:ArchiveClassesAtExit={tmp}", QUIET), tmp, archive)


#: an archive no session has mapped for this long belongs to a JVM or pyspark that is gone
UNUSED_S = 14 * 86400


def _touch(archive: Path) -> None:
    """Mark the archive used (at most daily), so `_forget_unused` keeps it."""
    try:
        if time.time() - archive.stat().st_mtime > 86400:
            os.utime(archive)
    except OSError:
        pass


def _forget_unused(keep: Path) -> None:
    """Delete other archives unused for `UNUSED_S` (another JVM or pyspark on this machine may still
    use a recent one: two environments must not delete each other's)."""
    for old in keep.parent.glob("spark-*.jsa"):
        try:
            if old != keep and time.time() - old.stat().st_mtime > UNUSED_S:
                old.unlink()
        except OSError:
            pass


def _forget_abandoned(where: Path) -> None:
    """Delete half-written dumps of processes that were killed before they could finish (an hour
    is far longer than any dump takes)."""
    for tmp in where.glob(".spark-*.jsa.tmp"):
        try:
            if time.time() - tmp.stat().st_mtime > 3600:
                tmp.unlink()
        except OSError:
            pass


def finish_dump_at_exit(plan: DriverJvm, session: Any) -> None:
    """When this process exits: stop the session, let the JVM exit (it writes the archive as it
    does), then publish the archive under its real name. Only the first session on a machine pays
    this (a few seconds at exit)."""
    if plan.dump_to is None or plan.archive is None:
        return
    tmp, archive = plan.dump_to, plan.archive

    def finish() -> None:
        try:
            proc = session.sparkContext._gateway.proc
            session.stop()
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()  # the gateway exits on EOF, and the JVM writes the archive on exit
                proc.wait(timeout=120)
            if proc is not None and proc.returncode == 0 and tmp.is_file() and tmp.stat().st_size > 0:
                os.replace(tmp, archive)
                _forget_unused(archive)
        except Exception:  # a cache that could not be written must never fail the check
            pass
        finally:
            tmp.unlink(missing_ok=True)

    atexit.register(finish)
