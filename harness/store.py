"""The run store (DESIGN.md): `store/<test-name>/<YYYYmmddTHHMMSS>-<seed>/`, `store/latest` -> newest.

`test.json` is written at the start with `"complete": false` and rewritten at the end, so an
interrupted run is recognisable; the history is appended as the run goes (harness/history.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.spec import RunSpec

ROOT = Path(__file__).resolve().parents[1]


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


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
        path.mkdir(parents=True)
        latest = Path(spec.store) / "latest"
        try:
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            os.symlink(path.resolve(), latest)
        except OSError:
            pass
        rd = cls(path, spec, {"seed": spec.seed, "config": spec.to_json(), "git": git_revision(),
                              "complete": False, "started": time.time()})
        rd.write_meta()
        return rd

    def write_meta(self, **updates: Any) -> None:
        self.meta.update(updates)
        tmp = self.path / "test.json.tmp"
        tmp.write_text(json.dumps(self.meta, indent=2, default=str))
        tmp.replace(self.path / "test.json")

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"
