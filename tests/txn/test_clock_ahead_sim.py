"""A transaction begun while its coordinator's clock ran ahead is aborted late, not never — and the
harness waits for it (`harness.hanging.patience_for`) instead of calling it hanging.

Found by the 1,000-seed campaign of the clean transactional cluster (`chaos sim-search --txn --jobs 2
--first-seed 200000 --time-limit 30 --rate 20`): seed 200251, shrunk to two faults. A zombie leader
stalls process 4's transaction; meanwhile its coordinator n2's wall clock is stepped +94.6 s for
0.3 s, and the transaction's start is stamped in that window. The coordinator aborts it only when
its clock passes start + 10 s, ~105 s after the step — as Kafka's `txnStartTimestamp` would. The
fixed 40 s wait reported it as `hanging-transaction`; the wait now covers the clock step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.hanging import PATIENCE_S, patience_for
from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.history import read_ops
from kernel.nemesis import PlannedFault, Target
from kernel.spec import build_spec

#: seed 200251's schedule as sim-search shrank it (the order and times matter; the targets are
#: resolved when each fault starts)
SHRUNK = [
    {"id": 0, "family": "clock", "kind": "bump", "at_s": 27.0, "duration_s": 0.3,
     "targets": {"n2": {"role": "node", "node": "n2"}}, "params": {"seconds": 94.569, "period_s": 0.486}},
    {"id": 1, "family": "zombie", "kind": "leader", "at_s": 21.588, "duration_s": 6.276,
     "targets": {"victim": {"role": "leader", "node": "n2", "key": 2}}, "params": {}},
]


def test_the_wait_covers_the_largest_forward_clock_step() -> None:
    def clock(seconds: float) -> PlannedFault:
        return PlannedFault(0, "clock", "bump", 0.0, 1.0, {"n1": Target.of_node("n1")}, {"seconds": seconds})

    kill = PlannedFault(1, "kill", "one", 0.0, 1.0, {"victim": Target.of_node("n1")}, {})
    assert patience_for([]) == PATIENCE_S
    assert patience_for([kill, clock(-200.0)]) == PATIENCE_S  # a clock set back delays nothing once reset
    assert patience_for([clock(3.5), kill, clock(94.569)]) == PATIENCE_S + 94.569


@pytest.mark.slow
def test_a_transaction_stamped_by_a_clock_ahead_ends_after_the_wait(tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "provisioner": "sim", "name": "sim-search", "workload": "txn", "nodes": 3, "time_limit": 30.0,
        "rate": 20.0, "seed": 200251, "nemesis": "clock,zombie", "nemesis_interval": 10.0}
    run_dir, meta = simulate(build_spec(settings), tmp_path, [PlannedFault.from_json(f) for f in SHRUNK])
    steps = [op.value for op in read_ops(run_dir / "history.jsonl") if op.f == "start-clock"]
    assert [v["seconds"] for v in steps] == [94.569]  # the step happened, and is longer than the old wait
    found = screen(run_dir)
    assert "hanging_transactions" not in meta and "hanging-transaction" not in found, (found, meta.get(
        "hanging_transactions"))
