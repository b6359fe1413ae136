"""The run store: `store/<test-name>/<YYYYmmddTHHMMSS>-<seed>/`, `store/latest` -> newest.

(docs/design.md, "The run store", lists every file a run leaves there.)

`test.json` is written at the start with `"complete": false` and rewritten at the end, so an
interrupted run is recognisable; the history is appended as the run goes (`kernel.history.HistoryWriter`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.errors import EnvironmentProblem
from kernel.spec import RunSpec

ROOT = Path(__file__).resolve().parents[1]


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def point_latest(store: Path, run: Path) -> None:
    """`store/latest` -> `run`, replacing only a link: a file or directory a user keeps there is theirs."""
    latest = store / "latest"
    if latest.exists() and not latest.is_symlink():
        return
    tmp = store / f".latest-{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        os.symlink(run.resolve(), tmp)
        tmp.replace(latest)
    except OSError:
        tmp.unlink(missing_ok=True)


@dataclass
class RunDir:
    path: Path
    spec: RunSpec
    meta: dict[str, Any]

    @classmethod
    def create(cls, spec: RunSpec) -> RunDir:
        base = Path(spec.store) / spec.name
        stamp = time.strftime("%Y%m%dT%H%M%S")
        path = base / f"{stamp}-{spec.seed}"
        n = 1
        while path.exists():
            n += 1
            path = base / f"{stamp}-{spec.seed}-{n}"
        try:
            path.mkdir(parents=True)
        except OSError as e:
            raise EnvironmentProblem(f"cannot create the run directory {path}: {e.strerror or e}") from None
        point_latest(Path(spec.store), path)
        rd = cls(path, spec, {"seed": spec.seed, "config": spec.to_json(), "git": git_revision(),
                              "complete": False, "started": time.time()})
        rd.write_meta()
        return rd

    def write_meta(self, **updates: Any) -> None:
        self.meta.update(updates)
        tmp = self.path / "test.json.tmp"
        try:
            tmp.write_text(json.dumps(self.meta, indent=2, default=str))
            tmp.replace(self.path / "test.json")
        except OSError as e:
            raise EnvironmentProblem(f"cannot write {self.path / 'test.json'}: {e.strerror or e}") from None

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"
