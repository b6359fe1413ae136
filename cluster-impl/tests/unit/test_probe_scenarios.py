"""Probes the simulator's mixes rarely or never reach, each hit by a scenario in this process: the
controller on an in-memory store (elections without an ISR, AlterIsr refusals, a failover during a
reassignment, a zombie controller's write) and the replica decisions (stale orders, KIP-279's search
below a diverged epoch). `tests/sim/test_sim_probes.py` shows the rest on the simulator, and
`PROCESS_SCENARIOS` and its `SIM_SCENARIOS` together cover every probe."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from logbroker import probes
from logbroker.controller.controller import Controller, ControllerSettings
from logbroker.controller.decisions import ElectionType
from logbroker.coord import paths
from logbroker.coord.model import PartitionState
from logbroker.core.partition import Role, TopicPartition
from logbroker.log.epoch_cache import LeaderEpochCache
from logbroker.offload import inline
from logbroker.replication import decisions as rules
from logbroker.replication.truncation import TruncationSearch
from memstore import MemoryStore
from test_replica_runner import late_controller_requests, request_before_registration


def _cluster(state: PartitionState, *, unclean: bool = False, replicas: tuple[int, ...] = (1, 2, 3)
             ) -> tuple[MemoryStore, Controller]:
    store = MemoryStore()
    for b in replicas:
        store.register_broker(b, f"n{b}", 9092)
    store.create_topic("t", {0: list(replicas)})
    store.write_partition_state("t", 0, state, None)
    c = Controller(1, store, lambda b, m: None,  # type: ignore[arg-type,return-value]
                   ControllerSettings(min_insync_replicas=2, unclean_leader_election=unclean), offload=inline)
    return store, c


def _kill(store: MemoryStore, c: Controller, *bids: int) -> None:
    for b in bids:
        del store.brokers[b]
    asyncio.run(c.on_brokers_changed())


def _active(c: Controller, epoch: int = 1) -> None:
    asyncio.run(c.become_active(epoch))


def leader_dies_with_the_isr(unclean: bool, elr: tuple[int, ...] = ()) -> Callable[[], None]:
    """The ISR's last member (the leader) dies; the others are alive but outside the ISR."""
    def run() -> None:
        store, c = _cluster(PartitionState(1, 5, (1,), 1, elr), unclean=unclean)
        _active(c)
        _kill(store, c, 1)
    return run


def alter_isr(change: str) -> Callable[[], None]:
    """An AlterIsr the controller refuses (or commits below min.insync.replicas)."""
    def run() -> None:
        store, c = _cluster(PartitionState(1, 5, (1, 2, 3), 1))
        _active(c)
        info = c.state.partitions[("t", 0)]  # type: ignore[union-attr]
        req: dict[str, Any] = {"broker_id": 1, "broker_epoch": store.brokers[1][2], "topic": "t", "partition": 0,
                               "leader_epoch": 5, "isr": [1], "zk_version": info.version}
        if change == "broker-epoch":
            req["broker_epoch"] -= 1
        elif change == "leader-epoch":
            req["leader_epoch"] = 4
        elif change == "version":
            req["zk_version"] -= 1
        elif change == "zombie":  # a newer controller wrote the state behind this one's back
            store.write_partition_state("t", 0, PartitionState(2, 6, (2, 3), 2), info.version)
        reply = asyncio.run(c.alter_isr(req))
        assert (reply["error"] == 0) == (change == "shrink"), reply
    return run


def failover_during_reassignment(target: list[int]) -> Callable[[], None]:
    """A new controller finds a move requested: to [1, 2] it completes at once (both in the ISR), to
    [1, 2, 4] it stays under way until 4 has caught up."""
    def run() -> None:
        store, c = _cluster(PartitionState(1, 5, (1, 2, 3), 1))
        store.register_broker(4, "n4", 9092)
        store.put_admin_requests(paths.REASSIGN, {("t", 0): target})
        _active(c, epoch=2)
    return run


def preferred_election() -> None:
    store, c = _cluster(PartitionState(2, 5, (1, 2, 3), 1))
    _active(c)
    out = asyncio.run(c.ops.elect_leaders(ElectionType.PREFERRED, [("t", 0)]))
    assert store.states[("t", 0)][0].leader == 1, out


def stale_leader_epoch_order() -> None:
    tp = TopicPartition("t", 0)
    body = {"controller_epoch": 1, "partitions": [{"topic": "t", "partition": 0, "leader": 2, "leader_epoch": 3,
                                                   "isr": [2], "replicas": [1, 2], "zk_version": 0}]}
    d = rules.leader_and_isr(rules.ReplicaState(1, frozenset()), {tp: rules.Local(Role.FOLLOWER, 5)}, body)
    assert d.reply["partitions"][0]["error"] != 0


def truncation_below_diverged_epoch() -> None:
    epochs = LeaderEpochCache(None)
    for epoch, start in ((0, 0), (2, 10), (3, 20)):
        epochs.assign(epoch, start)
    search = TruncationSearch(epochs, leo=30, hw=5)
    assert search.question() == 3
    search.answer(1, 12)  # the leader's epoch 1 (which we never had) ends at 12
    assert search.question() == 0  # so our epochs 2 and 3 diverged: ask about 0


def stale_controller_epoch_order() -> None:
    state, refused = rules.controller_request(rules.ReplicaState(1, frozenset(), controller_epoch=4), 3)
    assert refused


def leader_knows_none_of_our_epochs() -> None:
    epochs = LeaderEpochCache(None)
    epochs.assign(5, 0)
    search = TruncationSearch(epochs, leo=30, hw=12)
    search.answer(-1, -1)  # UNDEFINED: the leader never had any epoch as old as ours
    assert search.result == 12


def offsets_for_an_old_epoch() -> None:
    from logbroker.protocol.errors import Err

    assert rules.fenced_epoch(rules.ReplicaState(1, frozenset()), 3, 5) == Err.FENCED_LEADER_EPOCH


def late_requests() -> None:
    with tempfile.TemporaryDirectory() as d:
        late_controller_requests(Path(d))


def unregistered_requests() -> None:
    with tempfile.TemporaryDirectory() as d:
        request_before_registration(Path(d))


PROCESS_SCENARIOS: dict[str, Callable[[], None]] = {
    "controller-request-stale-broker-epoch": late_requests,
    "controller-request-before-registration": unregistered_requests,
    "update-metadata-out-of-order": late_requests,
    "leader-and-isr-stale-isr-version": late_requests,
    "offsets-for-epoch-fenced": offsets_for_an_old_epoch,
    "stale-controller-epoch-order": stale_controller_epoch_order,
    "truncation-leader-knows-no-epoch": leader_knows_none_of_our_epochs,
    "unclean-leader-election": leader_dies_with_the_isr(unclean=True),
    "partition-offline-with-live-laggard": leader_dies_with_the_isr(unclean=False),
    "elr-leader-elected": leader_dies_with_the_isr(unclean=False, elr=(2,)),
    "alter-isr-stale-broker-epoch": alter_isr("broker-epoch"),
    "alter-isr-fenced-leader-epoch": alter_isr("leader-epoch"),
    "alter-isr-version-conflict": alter_isr("version"),
    "controller-resigns-on-stale-version": alter_isr("zombie"),
    "isr-below-min-insync": alter_isr("shrink"),
    "controller-failover": failover_during_reassignment([1, 2]),
    "controller-failover-during-reassignment": failover_during_reassignment([1, 2, 4]),
    "reassignment-completed": failover_during_reassignment([1, 2]),
    "preferred-leader-election": preferred_election,
    "stale-leader-epoch-order": stale_leader_epoch_order,
    "truncation-steps-below-diverged-epoch": truncation_below_diverged_epoch,
}


@pytest.mark.parametrize("probe", sorted(PROCESS_SCENARIOS))
def test_a_scenario_hits_the_probe(probe: str) -> None:
    with probes.counting() as got:
        PROCESS_SCENARIOS[probe]()
    assert got.get(probe, 0) > 0, sorted(got)
