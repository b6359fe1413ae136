"""A hanging transaction on the simulator, through the one pipeline (`harness/hanging.py`): with
`forget-prepared-txns` (KAFKA-16352: a coordinator that takes over does not resume the transactions
it finds in PrepareCommit/PrepareAbort) the kills of seed 2 leave a partition's LSO below its HW for
good; the harness measures it before the drain, and the screen (and the check) name it
`hanging-transaction`. The same seed without the switch ends with every transaction closed. And
`marker-ack-before-replication` (seed 104 under leader kills and pauses) leaves one too. Found by
`chaos sim-search --txn --bug forget-prepared-txns --nemesis kill --nemesis-interval 4 --time-limit 20
--rate 40` (seed 2 of 2); the drain alone never showed it: a read_committed drain stops at the LSO."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.spec import build_spec

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, bugs: list[str], **settings: Any) -> tuple[dict[str, int], dict[str, Any]]:
    # the name as sim-search gave it: transactional ids (and so their coordinators) are derived from it
    spec = build_spec({"provisioner": "sim", "name": "sim-search", "workload": "txn", "nodes": 3, "time_limit": 20.0,
                       "rate": 40.0, "seed": 2, "nemesis": "kill", "nemesis_interval": 4.0, "bugs": bugs, **settings})
    run_dir, meta = simulate(spec, tmp_path)
    return screen(run_dir), meta


def test_a_forgotten_prepared_transaction_is_found_hanging(tmp_path: Path) -> None:
    found, meta = _run(tmp_path, ["forget-prepared-txns"])
    assert found.get("hanging-transaction", 0) >= 1, found
    hanging = meta["hanging_transactions"]
    assert hanging["partitions"] or hanging["transactions"]
    assert all(v["lso"] < v["hw"] for v in hanging["partitions"].values())


def test_the_same_seed_without_the_switch_closes_every_transaction(tmp_path: Path) -> None:
    found, meta = _run(tmp_path, [])
    assert "hanging_transactions" not in meta and "hanging-transaction" not in found, found


@pytest.mark.xfail(strict=False, reason=(
    "seed 104's hanging transaction came through the restarted-coordinator marker bug fixed in 016a63c "
    "(the sender took topics missing from an empty metadata cache for deleted), not through this switch "
    "alone; with the fix, the switch alone was not found in 96 seeds of two kill/pause-leader mixes "
    "(2026-11-29). The real-process test cluster-impl/tests/replication/test_repl_txn.py::"
    "test_a_marker_acknowledged_before_replication_is_lost_with_its_leader still catches it; a simulator "
    "scenario that does is still to be found"))
def test_a_marker_acknowledged_before_replication_is_found_hanging(tmp_path: Path) -> None:
    """`marker-ack-before-replication`: a leader answers WriteTxnMarkers before its ISR has the marker,
    the coordinator completes the transaction, the leader is killed or paused past its session, and
    the new leader never had the marker: the transaction stays open there for good. Seed 104 of
    `chaos sim-search --txn --bug marker-ack-before-replication --nemesis kill-leader,pause-leader
    --nemesis-interval 3 --time-limit 20 --rate 60 --first-seed 100` (the fifth seed)."""
    found, meta = _run(tmp_path, ["marker-ack-before-replication"], seed=104, rate=60.0,
                       nemesis="kill-leader,pause-leader", nemesis_interval=3.0)
    assert found.get("hanging-transaction", 0) >= 1, found
    assert all(v["lso"] < v["hw"] for v in meta["hanging_transactions"]["partitions"].values())
