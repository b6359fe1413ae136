"""Real run directories (see README.md) laid out as a store, for the plot, report and index tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VALID = FIXTURES / "valid-kill-controller"
INVALID = FIXTURES / "invalid-ack-before-replication"


def place(src: Path, store: Path, name: str | None = None, run: str | None = None, **test_updates: object) -> Path:
    """Copy a fixture run into `store/<name>/<run>/` (name from its test.json unless given)."""
    test = json.loads((src / "test.json").read_text())
    name = name or test["config"]["name"]
    test["config"]["name"] = name
    test.update(test_updates)
    dest = store / name / (run or f"20261123T000000-{test['seed']}")
    shutil.copytree(src, dest)
    (dest / "test.json").write_text(json.dumps(test, indent=1))
    return dest


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with the valid and the invalid run."""
    s = tmp_path / "store"
    place(VALID, s, run="20261123T091833-5")
    place(INVALID, s, run="20261123T092300-1")
    return s


@pytest.fixture
def valid_run(store: Path) -> Path:
    return store / "queue" / "20261123T091833-5"


@pytest.fixture
def invalid_run(store: Path) -> Path:
    return store / "bugk" / "20261123T092300-1"
