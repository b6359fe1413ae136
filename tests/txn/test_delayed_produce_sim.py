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
from kernel.history import read_ops
from kernel.nemesis import PlannedFault
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


#: the two faults of the nightly sim stage's seed 5 that tore a transaction through the simulator's
#: client (a kill, then Bufstream's delayed produce on key 3's leader)
SEED_5 = [{"id": 0, "family": "kill", "kind": "one", "at_s": 10.0, "duration_s": 6.46,
           "targets": {"victim": {"role": "node", "node": "n1"}}, "params": {}},
          {"id": 1, "family": "delayed-produce", "kind": "leader", "at_s": 19.173, "duration_s": 8.73,
           "targets": {"victim": {"role": "leader", "node": "n1", "key": 3}}, "params": {}}]


def test_a_producer_whose_write_timed_out_bumps_its_epoch_after_the_abort(tmp_path: Path) -> None:
    """KIP-890 part 1 asks the coordinator whether a write's partition is in the producer's ongoing
    transaction, which it is once the producer's *next* transaction added it: a held write of an
    aborted transaction that arrives then joins that one, unless its epoch was bumped. Part 2 clients
    (EndTxn v5) bump at every end; an EndTxn v1 client (half the simulated processes, as librdkafka)
    must bump after aborting a transaction whose produce timed out (KIP-360, librdkafka's
    "timed out messages require an epoch bump"). The simulator's client did not, and the nightly's
    sim stage read process 1's aborted value at key 0 as committed (G1a: 9 with these two faults)."""
    spec = build_spec({"provisioner": "sim", "workload": "txn", "name": "sim-txn", "nodes": 3, "time_limit": 32.0,
                       "rate": 100.0, "seed": 5, "nemesis": "delayed-produce,kill", "nemesis_interval": 10.0})
    run_dir, _ = simulate(spec, tmp_path, [PlannedFault.from_json(f) for f in SEED_5])
    ops = list(read_ops(run_dir / "history.jsonl"))
    held = [o for o in ops if o.process == "nemesis" and o.f in ("start-delayed-produce", "stop-delayed-produce")]
    assert len(held) == 2
    start, stop = held[0].time, held[1].time
    # the scenario: a v1 (odd) process's transaction given up while its write was held
    assert any(o.f == "txn" and o.type == "fail" and isinstance(o.process, int) and o.process % 2 == 1
               and start < o.time < stop for o in ops)
    assert screen(run_dir) == {}
