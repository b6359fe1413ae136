"""A hanging transaction on the simulator, through the one pipeline (`harness/hanging.py`): with
`forget-prepared-txns` (KAFKA-16352: a coordinator that takes over does not resume the transactions
it finds in PrepareCommit/PrepareAbort) the kills of seed 2 leave a partition's LSO below its HW for
good; the harness measures it before the drain, and the screen (and the check) name it
`hanging-transaction`. The same seed without the switch ends with every transaction closed. Found by
`chaos sim-search --txn --bug forget-prepared-txns --nemesis kill --nemesis-interval 4 --time-limit 20
--rate 40` (seed 2 of 2); the drain alone never showed it: a read_committed drain stops at the LSO.

The simulator's hanging transaction of `marker-ack-before-replication` is `test_held_markers_sim.py`:
random leader kills almost never land in the one fetch round that switch needs."""

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
