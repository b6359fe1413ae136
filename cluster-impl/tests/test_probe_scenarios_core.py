"""Probes of the transaction and group coordinators and the partition that the simulator's workload
(no transactions, few group commits) does not reach, each hit by a scenario on an in-process broker
core: the coordinators' own tests' scenarios where they already act one out, else a short one here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import test_group_coordinator as groups
import test_txn_coordinator as txc
import test_txn_core as txcore
import test_txn_partition as part
from logbroker import probes
from logbroker.core.clock import ManualClock
from logbroker.core.partition import Role, TopicPartition
from logbroker.group.records import partition_for
from logbroker.protocol.errors import Err
from logbroker.replication.fetcher import FetcherSettings, ReplicaFetcher
from logbroker.replication.truncation import TruncationSearch


def _core(tmp: Path, clock: ManualClock) -> Any:
    core = groups.make_core(tmp, clock)
    found = groups.answer(groups.call(core, 10, 2, {"key": groups.G, "key_type": 0}))  # creates __consumer_offsets
    assert found is not None and found["error_code"] == 0
    return core


def _joined(tmp: Path, clock: ManualClock) -> tuple[Any, str]:
    """A core whose group has its first generation joined (not yet synced: CompletingRebalance)."""
    core = _core(tmp, clock)
    groups.create_topic(core, "t", 1)
    first = groups.answer(groups.join(core, ""))
    assert first is not None
    member = str(first["member_id"])
    waiting = groups.join(core, member)
    clock.advance(3000)  # group.initial.rebalance.delay.ms
    core.tick()
    assert groups.answer(waiting) is not None
    return core, member


def commit_during_rebalance(tmp: Path) -> None:
    core, member = _joined(tmp, ManualClock(1_000_000))
    assert groups.commit(core, 1, member, "t", 0, 5) == Err.REBALANCE_IN_PROGRESS


def commit_of_an_old_generation(tmp: Path) -> None:
    core, member = _joined(tmp, ManualClock(1_000_000))
    assert groups.commit(core, 0, member, "t", 0, 5) == Err.ILLEGAL_GENERATION


def coordinator_moves_with_a_member_waiting(tmp: Path) -> None:
    """A member waits in JoinGroup (the initial delay) when the coordinator's partition is led elsewhere."""
    clock = ManualClock(1_000_000)
    core = _core(tmp, clock)
    first = groups.answer(groups.join(core, ""))
    assert first is not None
    waiting = groups.join(core, str(first["member_id"]))
    p = core.partitions[TopicPartition("__consumer_offsets", partition_for(groups.G, 3))]
    p.role = Role.FOLLOWER
    core.tick()
    got = groups.answer(waiting)
    assert got is not None and got["error_code"] == Err.NOT_COORDINATOR


def fetch_beyond_the_log_end(tmp: Path) -> None:
    core = txcore.make_core(tmp, **{"transaction.kip890.enable": "false"})
    got = txcore.body(txcore.fetch(core, 7, committed=False))["responses"][0]["partitions"][0]
    assert got["error_code"] == Err.OFFSET_OUT_OF_RANGE


def cut_below_the_hw(tmp: Path) -> None:
    """The new leader's epoch ends below this follower's HW (it lost records the follower counted
    committed): the follower's search lands there and cuts below its HW."""
    core = txcore.make_core(tmp, **{"transaction.kip890.enable": "false"})
    p = core.partitions[TopicPartition(txcore.TOPIC, 0)]
    for _ in range(5):
        p.append_as_leader(part.plain(2))
    p.hw = 8
    p.role, p.leader_id, p.leader_epoch = Role.FOLLOWER, 2, 7
    search = TruncationSearch(p.log.epochs, p.leo, p.hw)
    epoch = search.question()
    assert epoch is not None
    search.answer(epoch, 6)
    assert search.result == 6
    fetcher = ReplicaFetcher(2, core, lambda _b: None, FetcherSettings(1))
    key = (txcore.TOPIC, 0)
    fetcher.state.add(key, 7, p.leo)
    fetcher._cut(key, 7, search.result)
    assert p.leo == 6 and p.hw == 6


def commit_outlived_by_its_coordinator(tmp: Path) -> None:
    """An offset commit waits for a follower that never fetches; meanwhile the partition is led
    elsewhere and unloaded; the write times out after its load is gone."""
    clock = ManualClock(1_000_000)
    core = _core(tmp, clock)
    groups.create_topic(core, "t", 1)
    p = core.partitions[TopicPartition("__consumer_offsets", partition_for(groups.G, 3))]
    p.replicas, p.isr = [1, 2], [1, 2]  # a follower that never fetches: the HW stays
    reply = groups.call(core, 8, 6, {"group_id": groups.G, "generation_id_or_member_epoch": -1, "member_id": "",
                                     "topics": [{"name": "t", "partitions": [
                                         {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                          "committed_metadata": ""}]}]})
    assert groups.answer(reply) is None
    p.role = Role.FOLLOWER
    core.tick()
    clock.advance(10_000)
    core.tick()
    got = groups.answer(reply)
    assert got is not None and got["topics"][0]["partitions"][0]["error_code"] != 0


def txn_scenario(test: Callable[..., None], kind: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        if kind == "coordinated":
            test(txc.coordinated(txcore.make_core(tmp)))
        elif kind == "core":
            test(txcore.make_core(tmp, **{"transaction.kip890.enable": "false"}))
        elif kind == "verified":
            test(tmp, False)
        else:
            test(tmp)
    return run


SCENARIOS: dict[str, Callable[[Path], None]] = {
    "follower-truncates-below-hw": cut_below_the_hw,
    "group-commit-coordinator-lost-in-flight": commit_outlived_by_its_coordinator,
    "fetch-offset-out-of-range": fetch_beyond_the_log_end,
    "group-commit-during-rebalance": commit_during_rebalance,
    "group-commit-illegal-generation": commit_of_an_old_generation,
    "group-coordinator-moved-with-members": coordinator_moves_with_a_member_waiting,
    "txn-timed-out-aborted": txn_scenario(
        txc.test_a_transaction_open_past_its_timeout_is_aborted_by_the_coordinator, "coordinated"),
    "producer-id-block-not-ready": txn_scenario(
        txc.test_init_producer_id_waits_for_a_producer_id_block_with_a_retriable_error, "coordinated"),
    "txn-concurrent-transactions": txn_scenario(
        txc.test_a_new_incarnation_fences_the_old_one_and_aborts_its_open_transaction, "coordinated"),
    "produce-stale-producer-epoch": txn_scenario(txcore.test_transactional_produce_checks, "core"),
    "txn-marker-refused": txn_scenario(txcore.test_marker_errors_append_nothing, "core"),
    "txn-write-not-in-transaction": txn_scenario(
        txcore.test_a_transaction_opens_at_a_partition_only_if_the_coordinator_added_it, "verified"),
    "truncation-reopens-transaction": txn_scenario(part.test_truncation_reopens_a_transaction_whose_marker_it_cuts,
                                                   "path"),
}


@pytest.mark.parametrize("probe", sorted(SCENARIOS))
def test_a_scenario_hits_the_probe(probe: str, tmp_path: Path) -> None:
    with probes.counting() as got:
        SCENARIOS[probe](tmp_path)
    assert got.get(probe, 0) > 0, sorted(got)
