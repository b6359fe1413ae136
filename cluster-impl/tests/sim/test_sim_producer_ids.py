"""Producer ids from blocks claimed in ZooKeeper (`core/producer_id.py`, `replication/producer_ids.py`,
`ZkStore.claim_producer_id_block`), on the simulator's ZooKeeper model under the production `ZkStore`:
no id is handed out twice — not by a broker that restarts with its disk wiped (seed 70017, where the
old file-based allocator repeated its previous life's ids), not by two brokers that claim at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from kazoo.protocol.states import ZnodeStat
from logbroker.coord import paths
from logbroker.coord.zk import ZkStore
from logbroker.core.producer_id import FileProducerIds, ProducerIdBlock, ProducerIdBlocks, ProducerIdsUnavailable
from logbroker.offload import inline
from logbroker.replication.producer_ids import StoreProducerIds
from logsim.loop import Incarnation, SimLoop
from logsim.zookeeper import ZkClient, ZooKeeperModel


class World:
    def __init__(self) -> None:
        self.loop = SimLoop(1)
        self.zk = ZooKeeperModel(self.loop, ["n1", "n2", "n3"], lambda a, b: True)

    def client(self, host: str, inc: Incarnation) -> ZkClient:
        return ZkClient(self.zk, host, inc, 6.0)

    def store(self, client: ZkClient) -> ZkStore:
        s = ZkStore("sim", 6000, client=client)
        s.start()
        return s

    def ids(self, allocator: StoreProducerIds, n: int) -> list[int]:
        """`n` ids, as InitProducerId takes them: at once while a block is at hand, else after the
        retriable error, a little later (the claim runs on its own task)."""

        async def take() -> list[int]:
            allocator.start()
            out: list[int] = []
            while len(out) < n:
                try:
                    out.append(allocator.next())
                except ProducerIdsUnavailable:
                    await asyncio.sleep(0.01)
            return out

        return list(self.loop.run_until_complete(take()))


@pytest.fixture
def world() -> Any:
    w = World()
    yield w
    w.loop.shutdown()


def test_blocks_are_prefetched_at_90_percent_and_wait_with_a_retriable_error() -> None:
    asked: list[int] = []
    blocks = ProducerIdBlocks(lambda: asked.append(1))
    with pytest.raises(ProducerIdsUnavailable):
        blocks.next()
    with pytest.raises(ProducerIdsUnavailable):
        blocks.next()
    assert asked == [1]  # one claim in flight
    blocks.add(ProducerIdBlock(1, 0, 9))
    assert [blocks.next() for _ in range(8)] == list(range(8)) and asked == [1]
    assert blocks.next() == 8 and asked == [1, 1]  # 9 of 10 used: the next block is asked for
    blocks.add(ProducerIdBlock(1, 30, 39))  # arrives early: kept until this one is used up
    assert [blocks.next() for _ in range(3)] == [9, 30, 31] and asked == [1, 1]
    assert [blocks.next() for _ in range(7)] == list(range(32, 39)) and asked == [1, 1, 1]
    assert blocks.next() == 39
    with pytest.raises(ProducerIdsUnavailable):  # used up, the next one not here yet
        blocks.next()
    assert asked == [1, 1, 1]


def test_a_broker_restarted_with_a_wiped_disk_hands_out_no_id_twice(world: World, tmp_path: Path) -> None:
    first = Incarnation("n1", 1)
    before = world.ids(StoreProducerIds(world.store(world.client("n1", first)), inline, 1, lambda: False), 1500)
    world.loop.kill(first)  # the process dies; its log directory is wiped (nothing of it is read again)
    second = Incarnation("n1", 2)
    after = world.ids(StoreProducerIds(world.store(world.client("n1", second)), inline, 1, lambda: False), 1500)
    assert len(set(before)) == len(before) == 1500 and len(set(after)) == 1500
    assert not set(before) & set(after)
    assert min(after) > max(before)  # the znode only moves forward
    latest = ProducerIdBlock.from_json(world.zk.nodes[paths.LATEST_PRODUCER_ID_BLOCK].data)
    assert latest == ProducerIdBlock(1, 3000, 3999)  # two blocks per life (the second prefetched at 90%)
    # what the file-based allocator did (still a standalone broker's): a wiped file repeats ids
    old = FileProducerIds(tmp_path / "producer-id-block")
    used = [old.next() for _ in range(5)]
    (tmp_path / "producer-id-block").unlink()
    assert FileProducerIds(tmp_path / "producer-id-block").next() == used[0]


class Racing(ZkClient):
    """A client that, between its read of the latest block and its conditional write, lets another
    broker claim one: the interleaving two brokers' worker threads can produce on a real ZooKeeper."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.rival: ZkStore | None = None
        self.rival_claims: list[ProducerIdBlock] = []

    def _race(self) -> None:
        if self.rival is not None and len(self.rival_claims) < 2:
            self.rival_claims.append(self.rival.claim_producer_id_block(2))

    def get(self, path: str, watch: Any = None) -> tuple[bytes, ZnodeStat]:
        try:
            return super().get(path, watch)
        finally:
            if path == paths.LATEST_PRODUCER_ID_BLOCK:
                self._race()


def test_two_brokers_claiming_at_once_get_disjoint_blocks(world: World) -> None:
    racing = Racing(world.zk, "n1", Incarnation("n1", 1), 6.0)
    mine = world.store(racing)
    racing.rival = world.store(world.client("n2", Incarnation("n2", 1)))
    # our read finds no znode, the rival creates it: our create fails (NodeExists); we read again, the
    # rival moves it: our conditional set fails (BadVersion); the third try wins, after both of its
    first = mine.claim_producer_id_block(1)
    second = mine.claim_producer_id_block(1)  # no race left
    claims = [*racing.rival_claims, first, second]
    assert [(b.broker, b.first, b.last) for b in claims] == [
        (2, 0, 999), (2, 1000, 1999), (1, 2000, 2999), (1, 3000, 3999)]
    assert world.zk.nodes[paths.LATEST_PRODUCER_ID_BLOCK].version == 3  # created once, set three times
    assert ProducerIdBlock.from_json(world.zk.nodes[paths.LATEST_PRODUCER_ID_BLOCK].data) == second


def test_the_znode_has_kafkas_layout(world: World) -> None:
    world.store(world.client("n1", Incarnation("n1", 1))).claim_producer_id_block(7)
    assert json.loads(world.zk.nodes["/latest_producer_id_block"].data) == {
        "version": 1, "broker": 7, "block_start": "0", "block_end": "999"}
