"""Bufstream's scenario on the simulator (`nemesis/delayed_produce.py`): the clients' requests to a
leader are held past the producers' produce timeout and then delivered. Without KIP-890's
verification (`no-txn-verification`) a held write of an aborted transaction opens a transaction on
its partition that the producer's next one there commits — aborted records read as committed (G1a),
and a stray transaction left open (the drain never reaches the end); with it, the same seed is clean.
Seed 4 (two keys, so a producer's next transaction often writes the same partition) is kept as the
regression test."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.spec import build_spec

pytestmark = pytest.mark.slow


def _screen(tmp_path: Path, bugs: list[str]) -> tuple[dict[str, int], bool]:
    spec = build_spec({"provisioner": "sim", "workload": "txn", "nodes": 3, "time_limit": 40.0, "rate": 40.0,
                       "seed": 4, "partitions": 2, "nemesis": "delayed-produce-leader", "nemesis_interval": 3.0,
                       "bugs": bugs})
    run_dir, meta = simulate(spec, tmp_path)
    return screen(run_dir), bool(meta["drained"])


def test_without_verification_a_delayed_produce_tears_a_transaction(tmp_path: Path) -> None:
    found, _ = _screen(tmp_path, ["no-txn-verification"])
    assert found.get("G1a", 0) > 0


def test_with_verification_the_same_seed_is_clean(tmp_path: Path) -> None:
    assert _screen(tmp_path, []) == ({}, True)
