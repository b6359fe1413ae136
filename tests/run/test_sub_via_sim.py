"""`--sub-via subscribe` on the simulator: the simulated consumer speaks the group protocol to the
production group coordinator (`logsim/group.py`), and its history has the shape the container
client's has — a subscribe op, rebalances in the polls that saw them, acknowledged commits, the
commits the coordinator answered with — with every key handed out, and nothing lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.spec import build_spec

pytestmark = pytest.mark.slow


def _ops(tmp_path: Path, **over: Any) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 30.0, "rate": 50.0, "seed": 3,
                       "sub_via": "subscribe", **over})
    run_dir, meta = simulate(spec, tmp_path)
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()], meta, run_dir


def test_subscribers_share_the_keys_rebalance_and_commit(tmp_path: Path) -> None:
    ops, meta, run_dir = _ops(tmp_path, nemesis="")
    assert meta["recovered"] and meta["drained"] and not meta["worker_errors"]
    workers = {o["process"] for o in ops if o["f"] == "subscribe" and o["type"] == "ok"}
    assert len(workers) >= 8  # every worker subscribed (and some left and joined again)
    held: dict[Any, set[int]] = {}
    for o in ops:
        for r in o.get("rebalance-log", []):
            held[o["process"]] = (held.get(o["process"], set()) - set(r["revoked"])) | set(r["assigned"])
    assert set().union(*held.values()) == {0, 1, 2, 3}  # the coordinator handed every key out
    commits = [o for o in ops if o.get("commits")]
    assert commits and not [o for o in ops if o.get("commit-error")]
    assert any(o.get("fetched-commits") for o in ops)  # the coordinator answered with what was committed
    finals = [o for o in ops if o.get("final")]
    assert finals and finals[0]["f"] == "assign"  # the drain stays assign-based, outside the group
    assert screen(run_dir) == {}


def test_subscribers_under_faults_lose_nothing(tmp_path: Path) -> None:
    ops, meta, run_dir = _ops(tmp_path, nemesis="kill,partition,pause", nemesis_interval=5.0, time_limit=40.0)
    assert meta["recovered"] and meta["drained"]
    assert any(r["revoked"] for o in ops for r in o.get("rebalance-log", []))  # rebalances took keys away
    assert screen(run_dir) == {}
