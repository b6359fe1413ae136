"""The shared check server (`results/server.py`): `chaos check` processes share one warm Spark driver
through Spark Connect, and it goes away by itself.

Each test has its own cache directory (so its own server) and a short idle time; every server a test
starts is stopped at its end, whatever happened."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from results import server
from tests.checks.test_quiet_console import CHATTER
from tests.conftest import run_chaos

FIXTURES = Path(__file__).parent / "fixtures"
IDLE_S = 8


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = tmp_path / "cache"
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(where))
    yield where
    server.stop(where / "check-server")


def _env(cache: Path, **more: str) -> dict[str, str]:
    # CHAOS_CDS=0: no class-data archive to write into each test's new cache directory at exit
    return {"CHAOS_CACHE_DIR": str(cache), "CHAOS_CHECK_SERVER_DIR": str(cache / "check-server"),
            "CHAOS_CHECK_SERVER": "1", "CHAOS_CHECK_SERVER_IDLE": str(IDLE_S),
            "CHAOS_CDS": "0", **more}


def _servable(cache: Path) -> bool:
    """Whether a server can keep its files there (the last test makes that impossible)."""
    return not (cache / "check-server").is_file()


def _check(run: str, cache: Path, out: Path, *flags: str) -> dict:  # type: ignore[type-arg]
    got = run_chaos("check", *flags, str(FIXTURES / run), "--out", str(out), "--no-perf", "--elle-cli", "",
                    env=_env(cache), timeout=600)
    expected = json.loads((FIXTURES / run / "results.json").read_text())
    assert got.returncode == (0 if expected["valid"] is True else 1), got.stderr
    for noise in (*CHATTER, "Warning", "Traceback", "ssl_transport"):  # the JVM's, gRPC's and pyspark's own
        assert noise not in got.stderr and noise not in got.stdout, got.stderr
    # a check that starts its own driver JVM writes that JVM's spark.log beside its results; a served one
    # has no JVM of its own (so a silent fallback to checking in-process cannot pass for a served check)
    assert (out / "spark.log").is_file() == (not _servable(cache))
    found = json.loads((out / "results.json").read_text())
    assert found["valid"] == expected["valid"]
    assert found["bad_error_types"] == expected["bad_error_types"]
    return found  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.spark
def test_checks_share_one_server_which_stops_when_idle(cache: Path, tmp_path: Path) -> None:
    where = cache / "check-server"
    _check("valid-kill-controller", cache, tmp_path / "a")
    first = server.read_state(where)
    assert first is not None and server.alive(first.pid)
    # the token is the key to a Spark driver: only its owner may read it
    assert stat.S_IMODE((where / "server.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert str(first.port) in (where / "server.log").read_text()

    # an invalid run too, so a server that answered "valid" to everything could not pass
    _check("invalid-ack-before-replication", cache, tmp_path / "b")
    second = server.read_state(where)
    assert second is not None and second.pid == first.pid  # the same driver served both
    status = run_chaos("check-server", "status", env=_env(cache))
    assert status.returncode == 0 and f"check server {first.pid}" in status.stdout

    deadline = time.monotonic() + IDLE_S + 60
    while server.alive(first.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not server.alive(first.pid), "the server did not stop after its idle time"
    assert server.read_state(where) is None
    assert "no check server runs" in run_chaos("check-server", "status", env=_env(cache)).stdout


@pytest.mark.slow
@pytest.mark.spark
def test_a_dead_servers_files_are_replaced_and_stop_ends_it(cache: Path, tmp_path: Path) -> None:
    """A stale server.json whose pid is now another process: that process is neither used nor killed."""
    where = cache / "check-server"
    where.mkdir(parents=True, mode=0o700)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (where / "server.json").write_text(json.dumps({"pid": other.pid, "port": 1, "token": "x",
                                                       "versions": server.versions(), "started": 0}))
        assert not server.alive(other.pid)
        _check("valid-kill-controller", cache, tmp_path / "a")
        state = server.read_state(where)
        assert state is not None and state.pid != other.pid and server.alive(state.pid)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()

    # alive but answering nothing (SIGSTOP): gRPC would wait for ever; the check says so and stops
    os.killpg(state.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    got = run_chaos("check", str(FIXTURES / "valid-kill-controller"), "--out", str(tmp_path / "b"), "--no-perf",
                    "--elle-cli", "", env=_env(cache), timeout=300)
    assert got.returncode == 6 and "accepts connections but has not answered" in got.stderr, got.stderr
    assert "chaos check-server stop" in got.stderr and "Traceback" not in got.stderr
    assert not (tmp_path / "b" / "results.json").exists()
    assert time.monotonic() - t0 < server.FIRST_ANSWER_S + 30  # not the client's exit waiting on it again

    # `stop` ends even a stopped server at once (SIGCONT after its SIGTERM), not after its 30 s grace
    t0 = time.monotonic()
    got = run_chaos("check-server", "stop", env=_env(cache))
    assert time.monotonic() - t0 < 20
    assert got.returncode == 0 and f"stopped check server {state.pid}" in got.stdout
    assert not server.alive(state.pid) and server.read_state(where) is None


@pytest.mark.spark
def test_without_a_server_the_check_runs_in_its_own_process(cache: Path, tmp_path: Path) -> None:
    """A cache directory where no server can keep its files: the check still judges, in-process."""
    cache.mkdir(parents=True)
    (cache / "check-server").write_text("not a directory")
    _check("invalid-ack-before-replication", cache, tmp_path / "a")
    assert not any(p.name == "server.json" for p in cache.rglob("*"))
    assert os.path.isfile(cache / "check-server")
