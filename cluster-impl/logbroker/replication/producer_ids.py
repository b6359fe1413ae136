"""`StoreProducerIds`: a clustered broker's producer ids, in blocks claimed from the metadata store.

The block logic is sans-IO (`core/producer_id.py`'s `ProducerIdBlocks`); this runs its fetches. A
claim is a ZooKeeper read and conditional write, so it goes through the `Offload` every store call
takes (a worker thread in a real broker, inline in the simulator) on a task of its own, and is
tried again with backoff until it succeeds or the broker stops (`coord/retry.py`): InitProducerId
never waits on ZooKeeper, it answers COORDINATOR_LOAD_IN_PROGRESS while no id is at hand. The first
block is asked for at start-up, each next one once 90% of the current one is used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from logbroker.coord.retry import until_done
from logbroker.coord.store import ProducerIdStore
from logbroker.core.producer_id import ProducerIdBlock, ProducerIdBlocks
from logbroker.offload import Offload


class StoreProducerIds:
    def __init__(self, store: ProducerIdStore, offload: Offload, bid: int, gone: Callable[[], bool]) -> None:
        """`gone()`: the broker is stopping (a claim in flight then gives up)."""
        self.store, self.offload, self.bid, self.gone = store, offload, bid, gone
        self.blocks = ProducerIdBlocks(self._request)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """On the broker's loop: ask for the first block now, so the first InitProducerId finds one."""
        self._loop = asyncio.get_running_loop()
        self.blocks.start()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def next(self) -> int:
        return self.blocks.next()

    def _request(self) -> None:
        loop = self._loop
        if loop is None:  # asked before start(): a request handler, on the running loop
            loop = self._loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._claim())

    async def _claim(self) -> None:
        got: list[ProducerIdBlock] = []

        async def step() -> None:
            got.append(await self.offload(self.store.claim_producer_id_block, self.bid))

        try:
            await until_done(step, self.gone, f"broker {self.bid}: claiming a producer id block")
        finally:
            if got:
                self.blocks.add(got[0])
            else:
                self.blocks.failed()
