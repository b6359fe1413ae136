"""`chaos replay` of a simulated run whose history the replay does not reproduce byte for byte: under
the same code that is a bug in the simulator (exit 7); under changed code it is what replaying a
found seed after a fix looks like, so the replay says why the histories differ and ends with the new
verdict's exit code (seed 300051's replay after its fix ended as an "internal error" before)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kernel.store import git_revision
from tests.run.test_replay_shared import CHAOS, stored_sim_run


def _as_if(run: Path, where: Path, git: str) -> Path:
    """A copy of `run` recorded at revision `git`, its history's second line changed (the replay's
    will then differ there)."""
    shutil.copytree(run, where)
    meta = json.loads((where / "test.json").read_text())
    (where / "test.json").write_text(json.dumps({**meta, "git": git}))
    lines = (where / "history.jsonl").read_text().splitlines(keepends=True)
    op = json.loads(lines[1])
    lines[1] = json.dumps({**op, "time": op["time"] + 1}) + "\n"
    (where / "history.jsonl").write_text("".join(lines))
    return where


def _replay(run: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHAOS, "replay", str(run), "--no-progress"], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.spark
def test_a_replay_under_changed_code_reports_the_difference_and_the_new_verdict(tmp_path: Path) -> None:
    run = stored_sim_run(tmp_path)
    changed = _replay(_as_if(run, tmp_path / "changed", "0" * 40))
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert "differs from the original's from line 2 on: the code changed since (recorded at " + "0" * 40 \
        in changed.stderr
    assert "internal error" not in changed.stderr

    now = git_revision()
    if now.endswith("-dirty") or now == "unknown":  # a working tree with changes cannot stand for "the same code"
        return
    same = _replay(_as_if(run, tmp_path / "same", now))
    assert same.returncode == 7, same.stderr[-3000:]
    assert "the same code gave another history: a bug in the simulator" in same.stderr
