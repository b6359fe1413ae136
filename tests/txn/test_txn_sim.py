"""The transactional workload on the simulator: transactions committed and aborted by seed, read
with read_committed, under faults and with `--sub-via` both ways — and a correct cluster's history is
clean, while a broker with `lso-ignores-open-txns` is caught (its seed kept as a regression test)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.spec import build_spec

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, **over: Any) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    spec = build_spec({"provisioner": "sim", "workload": "txn", "nodes": 3, "time_limit": 15.0, "rate": 40.0,
                       "seed": 5, "nemesis": "kill,partition", "nemesis_interval": 4.0, **over})
    run_dir, meta = simulate(spec, tmp_path)
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()], meta, run_dir


def _txn_types(ops: list[dict[str, Any]]) -> Counter[str]:
    return Counter(o["type"] for o in ops if o["f"] == "txn" and o["type"] != "invoke")


def test_txns_commit_and_abort_under_faults_and_the_history_is_clean(tmp_path: Path) -> None:
    ops, meta, run_dir = _run(tmp_path)
    assert meta["recovered"] and meta["drained"] and not meta["worker_errors"]
    types = _txn_types(ops)
    assert types["ok"] > 0 and types["fail"] > 0
    aborted = [o for o in ops if o["f"] == "txn" and o["type"] == "fail"]
    assert any(m[0] == "poll" and m[1] for o in aborted for m in o["value"])  # a fail carries what it read
    assert any(o.get("abort") for o in aborted)  # aborted on purpose, by the seed
    committed_sends = [m for o in ops if o["f"] == "txn" and o["type"] == "ok" for m in o["value"] if m[0] == "send"]
    assert committed_sends and all(isinstance(m[2], list) and m[2][0] is not None for m in committed_sends)
    assert any(o["f"] == "start-kill" for o in ops) and any(o["f"] == "start-partition" for o in ops)
    assert screen(run_dir) == {}


def test_txns_with_subscribe(tmp_path: Path) -> None:
    ops, meta, run_dir = _run(tmp_path, sub_via="subscribe", nemesis="pause", seed=6)
    assert meta["recovered"] and meta["drained"] and not meta["worker_errors"]
    assert any(o["f"] == "subscribe" and o["type"] == "ok" for o in ops)
    assert any(o.get("rebalance-log") for o in ops if o["f"] == "txn")
    types = _txn_types(ops)
    assert types["ok"] > 0 and types["fail"] > 0
    assert screen(run_dir) == {}


def test_lso_ignoring_open_txns_is_caught_as_aborted_reads(tmp_path: Path) -> None:
    """Seed 5 with the switch: read_committed consumers read records of transactions that later abort."""
    _, meta, run_dir = _run(tmp_path, bugs=["lso-ignores-open-txns"], nemesis="", time_limit=10.0)
    assert screen(run_dir).get("G1a", 0) > 0
