"""Shared fixtures: a real 3-node docker cluster for the session, and the CLI as a subprocess."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.ssh import SSHRemote
from kernel.node import Node

ROOT = Path(__file__).resolve().parents[1]
CHAOS = str(Path(sys.executable).parent / "chaos")

# The session's check server (results/server.py). Every `chaos check`, `run`, `replay`, `nightly`,
# `detect` and `sim-search` a test starts as a process checks on one warm Spark driver kept in a directory of the
# session's own, as a user's do on theirs: the suite pays one driver JVM and one compile of the checks,
# not one per process (tests/README.md, "Time"). The controller (or the one process without xdist)
# makes the directory before its workers start, so they inherit it, and stops the server at the end
# (`pytest_unconfigure`); the idle time ends it should the session be killed. A test whose subject is
# a check in its own process says `--no-server` or `CHAOS_CHECK_SERVER=0`.
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ["CHAOS_CHECK_SERVER_DIR"] = tempfile.mkdtemp(prefix="chaos-test-check-server-")
os.environ["CHAOS_CHECK_SERVER"] = "1"
os.environ["CHAOS_CHECK_SERVER_IDLE"] = "300"


def pytest_configure(config: pytest.Config) -> None:
    """Checks inside the test processes themselves keep their own driver (the `spark` fixture's session,
    which many tests reach through `sparkContext`, which a Spark Connect session has not): a check of a
    `chaos run` called in-process (`KafkaChecker`) must not turn the worker's session into a client of
    the server for the tests after it."""
    from results import server

    server.enabled = lambda: False


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # a worker: the controller stops the one server after every worker is done
    from results import server

    where = Path(os.environ["CHAOS_CHECK_SERVER_DIR"])
    server.stop(where)
    shutil.rmtree(where, ignore_errors=True)


#: a test module holding a Docker test says so in its text (`pytest.mark.docker`, on a test or as `pytestmark`)
DOCKER_MARK = re.compile(r"\bpytest\.mark\.docker\b")


@functools.cache
def uses_docker(module: Path) -> bool:
    try:
        return bool(DOCKER_MARK.search(module.read_text()))
    except OSError:
        return False


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test` runs the suite on several pytest-xdist workers, a test module at a time: a module's
    tests may share a module-scoped fixture (one broker, one deployment) and build on each other's
    state in file order (`test_broker_api_versions.py`). Every module with a Docker test runs in one
    worker, one test at a time: they share that worker's cluster (`docker_cluster`), some name their
    own (`pytest-tansu`), and one removes every labelled container on the machine
    (`test_cluster_cli.py`). The modules of unit, ZooKeeper and Spark tests, each with its own ports
    and directories, spread over the other workers while those wait on containers. (A scheduler of
    our own rather than `--dist loadgroup`: the controller sees only test ids, and loadgroup's way of
    tagging them does not survive pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    root = Path(config.rootpath)

    class ModulesAndOneDockerWorker(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "docker" if uses_docker(root / module) else module

    return ModulesAndOneDockerWorker(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the session's SparkSession (`spark`) is a Spark test, marked or not, so
    `make test-fast` leaves it out. The scheduler above finds Docker tests by their module's text; a
    test marked some other way (a mark added here, say) would run beside the Docker worker and fight
    over containers."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("docker") is not None and not uses_docker(Path(item.path)):
            raise pytest.UsageError(f"{item.nodeid} is a docker test, but its module does not say "
                                    "`pytest.mark.docker` where make test's scheduler looks (tests/conftest.py)")


@dataclass
class DockerCluster:
    name: str
    nodes: list[Node]
    _remotes: dict[str, SSHRemote] = field(default_factory=dict)

    def remote(self, name: str) -> SSHRemote:
        if name not in self._remotes:
            self._remotes[name] = SSHRemote(next(n for n in self.nodes if n.name == name))
        return self._remotes[name]

    def close(self) -> None:
        for r in self._remotes.values():
            r.close()


@pytest.fixture(scope="session")
def chaos_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("chaos-home")
    old = os.environ.get("CHAOS_HOME")
    os.environ["CHAOS_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("CHAOS_HOME", None)
    else:
        os.environ["CHAOS_HOME"] = old


class _ClusterManager:
    """Owns the session's docker cluster; brings it (back) up on demand.

    A test of `chaos cluster down --all` removes every labelled container, including this one, so
    the manager checks the containers still exist and re-provisions when they do not.
    """

    def __init__(self) -> None:
        from harness.provision.docker import DockerProvisioner

        self.name = f"pytest-{os.getpid()}"
        self.prov = DockerProvisioner(self.name)
        self.cluster: DockerCluster | None = None

    def _alive(self) -> bool:
        import docker

        if self.cluster is None:
            return False
        running = docker.from_env().containers.list(filters={"label": f"chaos.cluster={self.name}"})
        return len(running) == len(self.cluster.nodes)

    def get(self) -> DockerCluster:
        if not self._alive():
            if self.cluster is not None:
                self.cluster.close()
                self.prov.down()
            self.cluster = DockerCluster(self.name, self.prov.up(3))
        assert self.cluster is not None
        return self.cluster

    def down(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        self.prov.down()


@pytest.fixture(scope="session")
def _cluster_manager(chaos_home: Path) -> Iterator[_ClusterManager]:
    mgr = _ClusterManager()
    try:
        yield mgr
    finally:
        mgr.down()


@pytest.fixture
def docker_cluster(_cluster_manager: _ClusterManager) -> DockerCluster:
    """Three node containers shared by the session (n1..n3), removed at the end even if tests fail."""
    return _cluster_manager.get()


def run_chaos(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `chaos` console script."""
    return subprocess.run(
        [CHAOS, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def until(what: str, pred: Callable[[], bool], step: Callable[[], None], timeout: float = 60) -> None:
    """Call `step` until `pred()` holds; AssertionError naming `what` after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        step()
        if pred():
            return
    raise AssertionError(f"timed out waiting for {what}")
