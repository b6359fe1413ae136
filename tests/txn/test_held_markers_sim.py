"""`held-markers` on the simulator, through the one pipeline: with `marker-ack-before-replication` a
leader answers the markers it was held back from until its next leader is muted, is killed, and the
next leader never had them — the transactions stay open there for good (`hanging-transaction`). The
same seed on a correct broker ends with every transaction closed: the coordinator had no answer and
sent the markers again to the new leader. The containers' counterpart is `chaos detect --bug
marker-ack-before-replication --mix targeted` (docs/measurements/transactions.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.spec import build_spec

pytestmark = pytest.mark.slow

#: the first of seeds 1-4 (30 s, a fault every 5 s) whose faults caught it: 2 and 3 did; in 1 and 4 the
#: one fault that ran to the kill held no marker, the other was skipped (an overlapping fault held the
#: leader's AlterIsr to the controller, so the survivor never left the ISR)
SEED = 2


def _run(tmp_path: Path, bugs: list[str]) -> tuple[dict[str, int], dict[str, Any], list[dict[str, Any]]]:
    spec = build_spec({"provisioner": "sim", "name": "sim-search", "workload": "txn", "nodes": 3, "time_limit": 30.0,
                       "rate": 40.0, "seed": SEED, "nemesis": "held-markers", "nemesis_interval": 5.0, "bugs": bugs})
    run_dir, meta = simulate(spec, tmp_path)
    faults = [json.loads(line)["value"] for line in (run_dir / "history.jsonl").read_text().splitlines()
              if '"stop-held-markers"' in line]
    return screen(run_dir), meta, faults


def test_markers_answered_before_replication_are_lost_with_their_leader(tmp_path: Path) -> None:
    found, meta, faults = _run(tmp_path, ["marker-ack-before-replication"])
    assert any(f.get("elected") == f.get("next_leader") for f in faults), faults
    assert found.get("hanging-transaction", 0) >= 1, (found, faults)
    assert all(v["lso"] < v["hw"] for v in meta["hanging_transactions"]["partitions"].values())


def test_the_same_faults_on_a_correct_broker_close_every_transaction(tmp_path: Path) -> None:
    found, meta, faults = _run(tmp_path, [])
    assert any(f.get("elected") == f.get("next_leader") for f in faults), faults
    assert "hanging_transactions" not in meta and not found, found
