"""Transactions on the simulator, through the production coordinator and partitions
(`logsim/txn_run.py`): a coordinator killed (or cut off) while a transaction sits in PrepareCommit and
a leader killed mid-transaction leave every committed transaction read once and whole, no aborted one read,
none hanging; the forget-prepared-txns switch (KAFKA-16352) leaves one hanging; and a seed replays
byte for byte in another process under another hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from logsim.txn_run import run


@pytest.mark.parametrize("seed", [1, 17])
def test_a_coordinator_killed_in_prepare_commit_and_a_leader_kill_lose_nothing(seed: int) -> None:
    """Seed 17 found an acks=all transactional produce answered before its ISR had it (the leader's
    KIP-890 answer path; `tests/test_txn_verify_ack.py`): a committed transaction lost a record with
    its leader, and its producer's later transactions all aborted on the sequence gap."""
    r = run(seed)
    assert len(r.faults) == 2 and "PrepareCommit" in r.faults[0]  # both kills happened, the first at its moment
    assert r.problems() == []
    outcomes = [o for _, _, o, _ in r.outcomes]
    assert outcomes.count("committed") >= 200 and outcomes.count("aborted") >= 60
    assert sum(len(v) for v in r.reads.values()) >= 4 * outcomes.count("committed")  # the verdict saw real reads


def test_a_coordinator_cut_off_in_prepare_commit_loses_nothing() -> None:
    """A zombie coordinator: cut off from the other brokers and ZooKeeper, it still takes its
    clients' requests while another broker loads the partition and finishes the transaction."""
    r = run(1, isolate=True)
    assert "isolate" in r.faults[0]
    assert r.problems() == []


def test_forget_prepared_txns_leaves_the_transaction_hanging() -> None:
    r = run(1, bugs=("forget-prepared-txns",))
    assert "p1 still PrepareCommit after the transaction timeout" in r.problems()


REPLAY = """
import sys
from pathlib import Path
from logsim.txn_run import run
run(int(sys.argv[1]), Path(sys.argv[2]))
"""


@pytest.mark.slow
def test_a_transactional_seed_replays_byte_for_byte(tmp_path: Path) -> None:
    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        subprocess.run([sys.executable, "-c", REPLAY, "3", str(out)], env={**os.environ, "PYTHONHASHSEED": hash_seed},
                       check=True, timeout=600, capture_output=True)
        outs.append(out)
    files = sorted(f.relative_to(outs[0]) for f in outs[0].rglob("*") if f.is_file())
    assert Path("history.jsonl") in files and any(f.parts[0] == "replicas" for f in files)
    assert files == sorted(f.relative_to(outs[1]) for f in outs[1].rglob("*") if f.is_file())
    assert all((outs[0] / f).read_bytes() == (outs[1] / f).read_bytes() for f in files)
