"""KIP-966 in the controller, on an in-memory store: a broker whose process started without its data
is taken out of every ISR and leadership once per process — a later session of the same process is
not — and an eligible leader replica, which holds every committed record, is elected instead; with
`lost-disk-in-isr` (Kafka's ZooKeeper mode) the empty broker is elected."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from logbroker.controller.controller import Controller, ControllerSettings
from logbroker.controller.decisions import elect_leader, next_elr
from logbroker.coord.model import PartitionState
from logbroker.offload import inline
from memstore import MemoryStore


def test_members_that_leave_an_isr_below_min_insync_stay_eligible() -> None:
    assert next_elr((1, 2, 3), (), (1, 2), min_isr=2) == ()  # still min.insync: commits go on without 3
    assert next_elr((1, 2), (), (1,), min_isr=2) == (2,)  # 2 holds everything committed
    assert next_elr((1,), (2,), (), min_isr=2, lost={1}) == (2,)  # a lost disk is never eligible
    assert next_elr((1,), (2,), (1, 2), min_isr=2) == ()  # back to min.insync
    assert next_elr((1, 2), (), (1,), min_isr=2, unclean=True) == ()
    assert elect_leader((1, 2, 3), (), {2, 3}, unclean_allowed=False, elr=(3,)).leader == 3
    assert elect_leader((1, 2, 3), (1,), {2, 3}, unclean_allowed=False).leader == -1


def _controller(store: MemoryStore, *, ignore_lost_data: bool = False) -> Controller:
    sent: list[Any] = []
    return Controller(1, store, lambda b, m: sent.append((b, m)),  # type: ignore[arg-type,return-value]
                      ControllerSettings(min_insync_replicas=2, ignore_lost_data=ignore_lost_data), offload=inline)


def _births(store: MemoryStore) -> None:
    """Three brokers, born empty: each process's registrations say so."""
    for b in (1, 2, 3):
        store.register_broker(b, f"n{b}", 9092, lost_data=f"{b}@birth")


def _partition(store: MemoryStore) -> None:
    """A partition whose ISR has shrunk to its leader 1 alone, with 2 an eligible leader replica."""
    store.create_topic("t", {0: [1, 2, 3]})
    store.write_partition_state("t", 0, PartitionState(1, 5, (1,), 1, (2,)), None)


@pytest.mark.parametrize("bug", [False, True])
def test_the_last_isr_member_that_lost_its_disk_is_not_elected(bug: bool) -> None:
    store = MemoryStore()
    _births(store)
    c = _controller(store, ignore_lost_data=bug)

    async def run() -> PartitionState:
        await c.become_active(1)  # handles the births, before any partition exists
        _partition(store)
        await c.on_topics_changed()
        assert store.states[("t", 0)][0].leader == 1
        store.register_broker(1, "n1", 9092, lost_data="1@birth")  # a new session of the same process
        await c.on_brokers_changed()
        st = store.states[("t", 0)][0]
        if not bug:  # a bounced leader is a failed one (KIP-380): the eligible 2 leads, and 1, which lost
            assert (st.leader, st.isr, st.elr) == (2, (2,), (1,))  # nothing, stays eligible
        store.register_broker(st.leader, f"n{st.leader}", 9092, lost_data="x@later")  # the leader's disk is lost
        assert store.lost_handled[st.leader] != "x@later"
        await c.on_brokers_changed()
        # handled (ignored, with the bug) and said so: an observer waiting for the cluster to settle
        # after the restart waits for this record, in both modes
        assert store.lost_handled[st.leader] == "x@later"
        return store.states[("t", 0)][0]

    st = asyncio.run(run())
    if bug:
        assert st.leader == 1  # Kafka's ZooKeeper mode: the empty broker leads; the others truncate to it
    else:
        assert (st.leader, st.isr, st.elr) == (1, (1,), ())  # the other eligible one, never the empty one
