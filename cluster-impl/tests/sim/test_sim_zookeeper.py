"""The ZooKeeper model under the production `ZkStore`: sessions, ephemerals, watches, versions, multi-ops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from logbroker.coord.model import PartitionState
from logbroker.coord.store import StaleVersion
from logbroker.coord.zk import ZkStore
from logsim.loop import Incarnation, SimLoop
from logsim.zookeeper import ZkClient, ZooKeeperModel


class World:
    def __init__(self) -> None:
        self.loop = SimLoop(1)
        self.cut: set[tuple[str, str]] = set()
        self.zk = ZooKeeperModel(self.loop, ["n1", "n2", "n3"], lambda a, b: (a, b) not in self.cut
                                 and (b, a) not in self.cut)

    def store(self, host: str, inc: Incarnation) -> ZkStore:
        return ZkStore("sim", 6000, client=ZkClient(self.zk, host, inc, 6.0))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)


@pytest.fixture
def world() -> Any:
    w = World()
    yield w
    w.loop.shutdown()


def test_an_expired_session_takes_its_ephemerals_and_fires_watches(world: World) -> None:
    i1, i2 = Incarnation("n1", 1), Incarnation("n2", 1)
    s1, s2 = world.store("n1", i1), world.store("n2", i2)
    s1.start()
    s2.start()
    e1 = s1.register_broker(1, "n1", 9092)
    s2.register_broker(2, "n2", 9092)
    fired: list[Any] = []
    assert sorted(s2.live_brokers(watch=fired.append)) == [1, 2]
    assert s1.try_become_controller(1) == 1 and s2.try_become_controller(2) is None

    async def later() -> None:
        world.loop.kill(i1)  # n1's process dies: no more heartbeats
        await asyncio.sleep(3)
        assert sorted(s2.live_brokers()) == [1, 2] and not fired  # within the session timeout
        await asyncio.sleep(5)

    world.run(later())
    assert sorted(s2.live_brokers()) == [2] and s2.controller() is None
    assert len(fired) == 1  # one-shot
    assert s2.try_become_controller(2) == 2  # the epoch moved on
    assert e1 > 0


def test_a_client_cut_from_the_quorum_gets_connection_loss_and_later_lost(world: World) -> None:
    inc = Incarnation("n1", 1)
    s = world.store("n1", inc)
    states: list[str] = []
    s.session_listeners.append(states.append)
    s.start()
    s.register_broker(1, "n1", 9092)
    world.cut.update({("n1", "n2"), ("n1", "n3")})

    async def wait(t: float) -> None:
        await asyncio.sleep(t)

    world.run(wait(10))
    from kazoo.exceptions import ConnectionLoss

    with pytest.raises(ConnectionLoss):
        s.live_brokers()
    world.cut.clear()
    world.run(wait(1))
    assert states == ["SUSPENDED", "LOST", "CONNECTED"]
    assert 1 not in s.live_brokers()  # the old registration died with the session


def test_versioned_writes_and_transactions(world: World) -> None:
    inc = Incarnation("n1", 1)
    s = world.store("n1", inc)
    s.start()
    st = PartitionState(1, 0, (1, 2), 1)
    assert s.write_partition_state("t", 0, st, None) == 0
    with pytest.raises(StaleVersion):
        s.write_partition_state("t", 0, st, None)  # exists
    assert s.write_partition_state("t", 0, PartitionState(2, 1, (2,), 1), 0) == 1
    with pytest.raises(StaleVersion):
        s.write_partition_state("t", 0, st, 0)  # lost the race
    assert s.partition_state("t", 0) == (PartitionState(2, 1, (2,), 1), 1)
    assert s.create_topic("t2", {0: [1, 2]}, {"min.insync.replicas": "2"})
    assert not s.create_topic("t2", {0: [1]}, {"min.insync.replicas": "1"})  # all or nothing
    assert s.topic_config("t2") == {"min.insync.replicas": "2"}
