"""One SparkSession for every check test (starting one costs seconds), and the real external
checkers where this machine has them: elle-cli (`$ELLE_CLI`, else the project's shared build) and
Jepsen's own Kafka checker (`$JEPSEN_KAFKA_CHECK`, else the shared build)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

ELLE_DEFAULT = Path(os.environ.get("CHAOS_SHARED_TOOLS", "/work/shared/tools")) / "elle-cli" / "elle-cli"
JEPSEN_DEFAULT = Path(os.environ.get("CHAOS_SHARED_TOOLS", "/work/shared/tools")) / "jepsen-kafka" / "check"


def _tool(env: str, default: Path) -> str | None:
    named = os.environ.get(env)
    if named:
        return named
    if default.is_file() and shutil.which("java"):
        return str(default)
    return None


ELLE_CLI = _tool("ELLE_CLI", ELLE_DEFAULT)
JEPSEN_CHECK = _tool("JEPSEN_KAFKA_CHECK", JEPSEN_DEFAULT)


@pytest.fixture(scope="module")
def spark() -> Any:
    """The process's local[2] session: started by the first module that asks, then reused
    (`get_spark` keeps one per process). Looked up per module, not held for the session: in-process
    code that asks for another master (the simulator search's judge: local[*]) replaces it, and
    `make test`'s workers run modules in any order. (Module-scoped, so the modules' own fixtures
    that judge a batch once can take it.)"""
    from results.spark import get_spark

    return get_spark("local[2]")


@pytest.fixture(scope="session")
def elle_cli() -> str:
    """The real elle-cli, or a skip that says how to get one."""
    if ELLE_CLI is None:
        pytest.skip("no elle-cli here: set ELLE_CLI (see results/README.md, 'elle-cli'); it needs Java 17")
    return ELLE_CLI


@pytest.fixture(scope="session")
def jepsen_check() -> str:
    """Jepsen's own Kafka checker, or a skip that says why."""
    if JEPSEN_CHECK is None:
        pytest.skip("no Jepsen Kafka checker here: set JEPSEN_KAFKA_CHECK (see results/README.md); needs Java 17")
    return JEPSEN_CHECK
