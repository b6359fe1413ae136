"""Producer ids for idempotent and transactional producers: unique cluster-wide, never handed out twice.

A producer id is the key of a producer's state at every partition (its epoch and last sequences:
the idempotent dedup). Two producers given the same id are one producer to the partitions: a new
producer's first batch that matches an old one's last is answered as a duplicate, and acknowledged
without being appended (simulator seed 70017, where a broker that lost its disk handed out its
previous life's ids again). So ids must never come from state a broker can lose.

With ZooKeeper (every clustered broker), ids come in blocks claimed from the metadata store, as in
Kafka's ZooKeeper-mode `ProducerIdManager` (KIP-98): `/latest_producer_id_block` holds the last block
any broker claimed, and a broker claims the one after it with a conditional write (see
`coord/store.py`'s `ProducerIdStore`). `ProducerIdBlocks` is the sans-IO part: the block in use, the
next one fetched ahead of need (once 90% of the current one is used, as Kafka's `RPCProducerIdManager`
prefetches), and when to ask for one; the replication layer runs the fetches
(`replication/producer_ids.py`). With no id at hand, `next()` raises `ProducerIdsUnavailable` and
InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS, which every client retries (Kafka answers it for
the same reason, "since older clients treat [REQUEST_TIMED_OUT] as fatal").

A standalone broker (no ZooKeeper: one broker, one log directory) keeps `FileProducerIds`: blocks
persisted in `log.dirs/producer-id-block` before use. Losing that file loses every partition's
producer state with it (they share the one directory), so a repeated id meets no old state there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from logbroker.coord.model import PRODUCER_ID_BLOCK as BLOCK
from logbroker.coord.model import ProducerIdBlock
from logbroker.log.checkpoint import read_int, write_int

__all__ = ["BLOCK", "FileProducerIds", "ProducerIdBlock", "ProducerIdBlocks", "ProducerIds",
           "ProducerIdsUnavailable"]

PREFETCH_AT = 0.9  # ask for the next block once this share of the current one is handed out


class ProducerIdsUnavailable(Exception):
    """No producer id is at hand yet (the first block, or the next one, is still being fetched):
    the request is answered COORDINATOR_LOAD_IN_PROGRESS and the client asks again."""


class ProducerIds(Protocol):
    def next(self) -> int:
        """A producer id never handed out before, by any broker; raises `ProducerIdsUnavailable`."""
        ...


class ProducerIdBlocks:
    """Hands out the ids of fetched blocks; calls `request()` when it wants one more (once at a time:
    `add` or `failed` re-arms it). Before the first block arrives, and whenever the current block is
    used up with the next not yet here, `next()` raises `ProducerIdsUnavailable`."""

    def __init__(self, request: Callable[[], None]) -> None:
        self._request = request
        self._current: ProducerIdBlock | None = None
        self._next_id = 0
        self._ahead: ProducerIdBlock | None = None
        self._requested = False

    def _ask(self) -> None:
        if not self._requested and self._ahead is None:
            self._requested = True
            self._request()

    def start(self) -> None:
        """Ask for the first block ahead of any request."""
        if self._current is None:
            self._ask()

    def next(self) -> int:
        if self._current is None or self._next_id > self._current.last:
            if self._ahead is None:
                self._ask()
                raise ProducerIdsUnavailable("waiting for a producer id block")
            self._current, self._ahead = self._ahead, None
            self._next_id = self._current.first
        b = self._current
        pid = self._next_id
        self._next_id += 1
        if self._next_id - b.first >= b.size * PREFETCH_AT:
            self._ask()
        return pid

    def add(self, block: ProducerIdBlock) -> None:
        """A block claimed for us has arrived."""
        self._requested = False
        if self._current is None or self._next_id > self._current.last:
            self._current, self._next_id = block, block.first
        else:
            self._ahead = block

    def failed(self) -> None:
        """A fetch gave up (the broker stops): the next `next()` may ask again."""
        self._requested = False


class FileProducerIds:
    """A standalone broker's ids: blocks persisted in a file of its log directory before use, so a
    restart skips the block it was handing out (see the module docstring for why a lost file is
    harmless there, and why a clustered broker must not use this)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._next = 0
        self._limit = 0

    def next(self) -> int:
        if self._next >= self._limit:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            start = read_int(self.path, 0)
            self._next, self._limit = start, start + BLOCK
            write_int(self.path, self._limit)
        pid = self._next
        self._next += 1
        return pid
