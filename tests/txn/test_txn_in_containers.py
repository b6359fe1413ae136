"""`chaos run --txn` on real containers: librdkafka's transactional producer and a read_committed
consumer against the broker's transaction code, under a partition — transactions committed and
aborted by seed, the history well-formed in Jepsen's model, and the run valid."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import run_chaos

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_a_short_txn_run_commits_aborts_and_is_valid(tmp_path: Path) -> None:
    res = run_chaos("run", "--txn", "--nodes", "3", "--time-limit", "20", "--nemesis", "partition",
                    "--nemesis-interval", "6", "--concurrency", "4", "--rate", "20", "--partitions", "3",
                    "--seed", "3", "--no-progress", "--store", str(tmp_path), "--cluster", f"txn-{os.getpid()}",
                    timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = [p for p in (tmp_path / "txn").iterdir() if p.is_dir()]
    meta = json.loads((run_dir / "test.json").read_text())
    assert meta["config"]["workload"] == "txn" and meta["recovered"] and meta["drained"]
    ops = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    types = Counter(o["type"] for o in ops if o["f"] == "txn" and o["type"] != "invoke")
    assert types["ok"] > 0 and types["fail"] > 0
    sends = [m for o in ops if o["f"] == "txn" and o["type"] == "ok" for m in o["value"] if m[0] == "send"]
    assert sends and all(isinstance(m[2], list) and isinstance(m[2][0], int) for m in sends)  # offsets known
    assert any(o.get("final") and o["f"] == "poll" for o in ops)  # the drain read to the end
