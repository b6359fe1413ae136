"""`chaos replay` of a run shared by its test.json alone — what a bug report attaches: the seed, the
configuration and the (shrunk) schedule are all a replay needs; without the original history there
is nothing to compare byte for byte, which the replay says instead of failing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = str(Path(sys.executable).parent / "chaos")


def stored_sim_run(tmp_path: Path) -> Path:
    """A short simulated run (seed 3, kills) in a store under `tmp_path`; its run directory."""
    store = tmp_path / "store"
    first = subprocess.run([CHAOS, "run", "--provisioner", "sim", "--time-limit", "5", "--nemesis", "kill",
                            "--seed", "3", "--store", str(store), "--no-progress"],
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    return next(p for p in (store / "queue").iterdir() if (p / "test.json").is_file())


@pytest.mark.slow
@pytest.mark.spark
def test_a_run_shared_by_its_test_json_alone_replays(tmp_path: Path) -> None:
    run = stored_sim_run(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copy(run / "test.json", shared / "test.json")
    again = subprocess.run([CHAOS, "replay", str(shared), "--no-progress"], capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "holds no history.jsonl" in again.stderr
    assert "holds no results.json to compare with" in again.stderr
