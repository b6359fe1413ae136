"""`chaos run --test-count N` stops at the first INVALID run, as Jepsen's `--test-count` does: a user
repeating a run hunts for one failure, and once it is found the rest of the budget is better spent
replaying it. `--keep-going` runs every seed (a campaign that counts how often a switch is caught).

Seed 2 of this simulated mix (`truncate-to-hw` under kills) is INVALID, seed 1 VALID (pinned: the
simulator replays a seed byte for byte)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_chaos

pytestmark = [pytest.mark.spark, pytest.mark.slow]
MIX = ["run", "--provisioner", "sim", "--nodes", "3", "--bug", "truncate-to-hw", "--nemesis", "kill",
       "--nemesis-interval", "2", "--time-limit", "10", "--rate", "100", "--no-progress"]


def _runs(store: Path) -> list[Path]:
    return sorted(p for p in (store / "queue").iterdir() if p.is_dir())


def test_repeated_runs_stop_at_the_first_invalid_one(tmp_path: Path) -> None:
    store = tmp_path / "store"
    res = run_chaos(*MIX, "--seed", "1", "--test-count", "3", "--store", str(store), timeout=900)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "run 1/3 seed 1: VALID" in res.stderr and "run 2/3 seed 2: INVALID" in res.stderr, res.stderr[-3000:]
    assert "stopping at the first INVALID run (1 left; --keep-going runs them)" in res.stderr
    assert "run 3/3" not in res.stderr and len(_runs(store)) == 2


def test_keep_going_runs_every_seed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    res = run_chaos(*MIX, "--seed", "2", "--test-count", "2", "--keep-going", "--store", str(store), timeout=900)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "run 1/2 seed 2: INVALID" in res.stderr and "run 2/2 seed 3:" in res.stderr, res.stderr[-3000:]
    assert "stopping" not in res.stderr and len(_runs(store)) == 2
