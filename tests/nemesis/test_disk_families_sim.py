"""The two disk fault families on the simulator backend, through the one pipeline (`chaos run
--provisioner sim`): each is acted out (its ops in the history, what it lost in their values), a
correct cluster recovers with nothing acknowledged lost, and a planted mistake is caught.

The same families on containers: `tests/nemesis/test_disk_families_in_containers.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.spec import build_spec

pytestmark = pytest.mark.slow
#: Kafka's default: no fsync of its own; what a crash loses is then the whole unsynced tail
NO_FSYNC = {"flush.messages": str(2**62)}


def _run(tmp: Path, **over: Any) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 30.0, "rate": 100.0, "seed": 5,
                       "nemesis_interval": 5.0, "max_active": 1, **over})
    run_dir, meta = simulate(spec, tmp)
    ops = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    return run_dir, meta, [o for o in ops if o["process"] == "nemesis"]


def test_lose_unfsynced_loses_nothing_acknowledged_when_every_append_is_fsynced(tmp_path: Path) -> None:
    """Both backends deploy `flush.messages=1`: every record an ISR member holds is on its disk, so a
    crash that forgets the unsynced rest costs the cluster nothing acknowledged."""
    run_dir, meta, ops = _run(tmp_path, nemesis="lose-unfsynced")
    assert {o["f"] for o in ops} >= {"start-lose-unfsynced", "stop-lose-unfsynced"}
    assert meta["recovered"] and meta["drained"]
    assert screen(run_dir) == {}


def test_lose_unfsynced_drops_the_unsynced_tail(tmp_path: Path) -> None:
    """With Kafka's default (no fsync of its own) each crash takes the victim's unsynced tail with it:
    the bytes lost are in the fault's value and the victim's log (what KIP-966 is about: Kafka may
    then lose acknowledged records, so this test does not ask the cluster to be clean)."""
    run_dir, _, ops = _run(tmp_path, nemesis="lose-unfsynced", extra=NO_FSYNC)
    starts = [o for o in ops if o["f"] == "start-lose-unfsynced"]
    assert starts and all(o["value"]["nodes"] == [o["value"]["targets"]["victim"]["node"]] for o in starts)
    assert any(sum(o["value"]["lost"].values()) > 0 for o in starts), starts
    victim = next(o["value"]["nodes"][0] for o in starts if o["value"]["lost"])
    assert "power loss: unflushed bytes lost" in (run_dir / "nodes" / victim / "broker.log").read_text()


def test_lose_unfsynced_finds_a_leader_that_acknowledges_before_replicating(tmp_path: Path) -> None:
    """`ack-before-replication`: a leader acknowledges what only it holds, unsynced; its crash loses it."""
    run_dir, _, _ = _run(tmp_path, nemesis="lose-unfsynced-leader", extra=NO_FSYNC, bugs=["ack-before-replication"])
    found = screen(run_dir)
    assert "lost-write" in found or "unseen" in found, found


@pytest.mark.parametrize("kind", ["one", "leader"])
def test_disk_loss_brings_a_broker_back_empty_and_the_cluster_loses_nothing(tmp_path: Path, kind: str) -> None:
    run_dir, meta, ops = _run(tmp_path, nemesis=f"disk-loss-{kind}")
    stops = [o for o in ops if o["f"] == "stop-disk-loss"]
    assert stops and all(o["value"]["wiped"] for o in stops)
    assert [o["f"] for o in ops if str(o.get("fault", "")).count(".")] and meta["recovered"] and meta["drained"]
    victim = stops[0]["value"]["wiped"]
    assert "came back without their data" in (run_dir / "nodes" / "n1" / "broker.log").read_text() + \
        (run_dir / "nodes" / "n2" / "broker.log").read_text() + (run_dir / "nodes" / "n3" / "broker.log").read_text()
    assert "disk lost" in (run_dir / "nodes" / victim / "broker.log").read_text()
    assert screen(run_dir) == {}


@pytest.mark.parametrize("bug", ["lost-disk-in-isr", ""])
def test_the_last_isr_replica_that_lost_its_disk_is_not_elected(tmp_path: Path, bug: str) -> None:
    """KIP-966's motivation: the ISR shrinks to its leader alone, the leader loses its disk and comes
    back at once, still the ISR's only member. Kafka's ZooKeeper mode (the switch) elects it, empty,
    and the followers truncate to it; the fixed controller keeps it out and elects an eligible leader
    replica, a follower that holds every acknowledged record."""
    run_dir, meta, ops = _run(tmp_path, nemesis="disk-loss-last-isr", time_limit=40.0, bugs=[bug] if bug else [])
    stop = next(o for o in ops if o["f"] == "stop-disk-loss")["value"]
    assert stop["isr_when_killed"] == [stop["leader"]], stop  # the scenario happened as planned
    found = screen(run_dir)
    assert ("lost-write" in found) is bool(bug), found
    if not bug:
        assert meta["recovered"] and meta["drained"]
        logs = "".join((run_dir / "nodes" / n / "broker.log").read_text() for n in ("n1", "n2", "n3"))
        assert "eligible leader replica" in logs
