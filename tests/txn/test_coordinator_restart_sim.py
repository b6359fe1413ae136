"""A transaction coordinator that restarts completes a pending abort with every marker written —
it does not take the topics it has not heard of yet for deleted.

Found by a 60-seed sample of the clean transactional cluster (`chaos sim-search --txn --jobs 2
--first-seed 300000 --time-limit 30 --rate 20`), seed 300051, three faults. Process 8's
transaction (keys 0 and 2) is aborted at 25.4 s; the power loss of n1 and n3 at 28.7 s cuts the
abort off after PrepareAbort. n1 comes back, leads `__transaction_state` again and resumes the
abort, but its LeaderAndIsr came before its first UpdateMetadata: with no topic in its metadata
cache, the marker sender dropped chaos-2 as "topic gone" and wrote CompleteAbort. chaos-2 kept the
transaction open (LSO 203, HW 218) with no coordinator to end it: `hanging-transaction`. The sender
now waits for a whole view of the cluster (`MetadataCache.complete`) before calling a topic deleted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.nemesis import PlannedFault
from kernel.spec import build_spec

#: seed 300051's schedule as sim-search shrank it (targets are resolved when each fault starts)
SHRUNK = [
    {"id": 0, "family": "kill", "kind": "all", "at_s": 10.0, "duration_s": 6.435,
     "targets": {n: {"role": "node", "node": n} for n in ("n1", "n2", "n3")}, "params": {}},
    {"id": 1, "family": "lagging-follower", "kind": "kill-isr", "at_s": 17.621, "duration_s": 0.409,
     "targets": {"leader": {"role": "leader", "node": "n2", "key": 2}}, "params": {"key": 2, "lag_s": 14.21}},
    {"id": 2, "family": "power-loss", "kind": "majority", "at_s": 28.67, "duration_s": 1.33,
     "targets": {"n1": {"role": "node", "node": "n1"}, "n3": {"role": "node", "node": "n3"}},
     "params": {"order": ["n3", "n1"], "delays_s": [0.8, 1.29]}},
]


@pytest.mark.slow
def test_a_restarted_coordinator_writes_every_marker_of_the_abort_it_resumes(tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "provisioner": "sim", "name": "sim-search", "workload": "txn", "nodes": 3, "time_limit": 30.0,
        "rate": 20.0, "seed": 300051, "nemesis_interval": 10.0}
    run_dir, meta = simulate(build_spec(settings), tmp_path, [PlannedFault.from_json(f) for f in SHRUNK])
    logs = "".join(p.read_text() for p in (run_dir / "nodes").glob("*/broker.log"))
    assert "power-loss" in (run_dir / "history.jsonl").read_text()  # the schedule was played
    assert "whose topic is gone" not in logs, "no topic was deleted in this run"
    found = screen(run_dir)
    assert "hanging_transactions" not in meta and "hanging-transaction" not in found, (found, meta.get(
        "hanging_transactions"))
