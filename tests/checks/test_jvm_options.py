"""The driver JVM's class-data-sharing archive (results/jvm.py): written once, mapped after, never trusted blindly.

No JVM is started here: these are the decisions taken before one starts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from results import jvm


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CHAOS_CDS", raising=False)
    monkeypatch.delenv("CHAOS_SPARK_JAVA_OPTIONS", raising=False)
    return tmp_path / "cache"


def _opt(plan: jvm.DriverJvm, prefix: str) -> str | None:
    return next((o for o in plan.options if o.startswith(prefix)), None)


def test_first_session_writes_the_archive_under_a_temporary_name(cache: Path) -> None:
    plan = jvm.driver_jvm()
    assert plan.dump_to is not None and plan.archive is not None
    assert _opt(plan, "-XX:ArchiveClassesAtExit=") == f"-XX:ArchiveClassesAtExit={plan.dump_to}"
    assert plan.dump_to.parent == cache and plan.dump_to.name.startswith(".")
    assert _opt(plan, "-XX:SharedArchiveFile=") is None


def test_later_sessions_map_it(cache: Path) -> None:
    first = jvm.driver_jvm()
    assert first.archive is not None
    first.archive.write_bytes(b"archive")
    plan = jvm.driver_jvm()
    assert plan.dump_to is None
    assert _opt(plan, "-XX:SharedArchiveFile=") == f"-XX:SharedArchiveFile={first.archive}"
    assert "-Xshare:auto" in plan.options  # a stale archive is skipped by the JVM, not fatal


def test_other_options_get_their_own_archive(cache: Path) -> None:
    a = jvm.driver_jvm(("-XX:TieredStopAtLevel=1",)).archive
    b = jvm.driver_jvm().archive
    assert a is not None and b is not None and a != b


def test_turned_off_or_without_java_no_archive(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_CDS", "0")
    off = jvm.driver_jvm(("-XX:TieredStopAtLevel=1",))
    assert off.options == ("-XX:TieredStopAtLevel=1",) and off.dump_to is None
    monkeypatch.delenv("CHAOS_CDS")
    monkeypatch.setattr(jvm, "_java", lambda: None)
    assert jvm.driver_jvm().options == ()


def test_user_options_are_passed_on(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_SPARK_JAVA_OPTIONS", "-Xss4m -XX:+UseParallelGC")
    plan = jvm.driver_jvm()
    assert "-Xss4m" in plan.options and "-XX:+UseParallelGC" in plan.options


def test_only_long_unused_archives_and_abandoned_dumps_are_deleted(cache: Path) -> None:
    cache.mkdir(parents=True)
    keep, recent, old = cache / "spark-a.jsa", cache / "spark-b.jsa", cache / "spark-c.jsa"
    stale_tmp, live_tmp = cache / ".spark-d.1.jsa.tmp", cache / ".spark-d.2.jsa.tmp"
    for f in (keep, recent, old, stale_tmp, live_tmp):
        f.write_bytes(b"x")
    long_ago = time.time() - jvm.UNUSED_S - 60
    for f in (old, stale_tmp):
        os.utime(f, (long_ago, long_ago))
    jvm._forget_unused(keep)
    jvm._forget_abandoned(cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([keep.name, recent.name, live_tmp.name])
