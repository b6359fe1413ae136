"""A simulation leaves no file of its brokers open: a sim-search runs thousands of seeds in one
process, and each simulated crash and each run's end closed the segments but not the aborted
transaction index — one descriptor per replica each time (and, the directory being deleted, its
memory in /dev/shm); a search died of `Too many open files` after 876 seeds."""

from __future__ import annotations

import os
from pathlib import Path

from harness.sim_search import simulate
from kernel.nemesis import PlannedFault
from kernel.spec import build_spec

#: two kills of one broker: its files are closed at each crash, the others' at the run's end
KILLS = [{"id": i, "family": "kill", "kind": "one", "at_s": 3.0 + 4 * i, "duration_s": 1.0,
          "targets": {"victim": {"role": "node", "node": "n2"}}, "params": {}} for i in range(2)]


def _open_logsim_files() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        if "logsim-" in target:
            out.append(target)
    return out


def test_no_broker_file_stays_open_after_crashes_and_the_run(tmp_path: Path) -> None:
    before = _open_logsim_files()
    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 12.0, "rate": 20.0, "seed": 1,
                       "nemesis": "kill"})
    _, meta = simulate(spec, tmp_path, [PlannedFault.from_json(f) for f in KILLS])
    assert meta["recovered"]
    assert _open_logsim_files() == before == []
