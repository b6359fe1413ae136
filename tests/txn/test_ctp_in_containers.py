"""`--txn-mode ctp` on real containers: Kafka Streams' exactly-once loop (poll, send, and the
consumer's next offsets committed inside the transaction with `send_offsets_to_transaction`:
AddOffsetsToTxn and TxnOffsetCommit) through librdkafka against the broker's group and transaction
coordinators, under broker kills.

What must hold beyond a valid verdict (which already judges the group's commits: `lost-commit`,
`commit-regression`, `reread-committed`, `results/commits.py`): transactions did commit offsets,
and each commit is past what that transaction read of the key."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_chaos

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _ops(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]


def test_ctp_commits_the_groups_offsets_inside_its_transactions(tmp_path: Path) -> None:
    # A transaction commits offsets only once its consumer has read something (an empty partition has
    # no position to commit), so the first ones, on an empty topic, commit none. Under two busy loops
    # beside the suite (a CI of 2026-12-07) a kill every 8 s of 30 left 4 committed transactions, all
    # before anything was there to read, and every later one timed out (AddOffsetsToTxn, produce):
    # kills 15 s apart in 40 s leave the group and the coordinators time to settle between them.
    res = run_chaos("run", "--txn", "--txn-mode", "ctp", "--sub-via", "subscribe", "--nodes", "3",
                    "--time-limit", "40", "--nemesis", "kill", "--nemesis-interval", "15", "--concurrency", "4",
                    "--rate", "20", "--partitions", "3", "--seed", "21", "--no-progress", "--store", str(tmp_path),
                    "--cluster", f"ctp-{os.getpid()}", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = [p for p in (tmp_path / "txn").iterdir() if p.is_dir()]
    ops = _ops(run_dir)
    done = [o for o in ops if o["f"] == "txn" and o["type"] == "ok"]
    with_commits = [o for o in done if o.get("commits")]
    ended = [(o["process"], o["type"], (o.get("error") or "")[:120])
             for o in ops if o["f"] == "txn" and o["type"] != "invoke"]
    assert with_commits, f"no transaction committed offsets ({len(done)} committed); every transaction's end: {ended}"
    for o in with_commits:  # each commit is past the transaction's own reads of that key
        read: dict[str, int] = {}
        for m in o["value"]:
            if m[0] == "poll":
                for k, pairs in m[1].items():
                    if pairs:
                        read[k] = max(read.get(k, -1), max(off for off, _ in pairs))
        for k, last in read.items():
            assert int(o["commits"].get(k, last + 1)) > last, (o["index"], k, last, o["commits"])
