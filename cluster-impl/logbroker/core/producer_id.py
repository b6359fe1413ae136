"""Producer ids for idempotent producers, never reused across restarts.

Ids are allocated from blocks persisted in a small file before use, so a restarted broker skips
the block it was handing out. The broker id is folded into the high bits so two brokers never
hand out the same id (with ZooKeeper a shared counter could replace this; the format stays).
"""

from __future__ import annotations

from pathlib import Path

from logbroker.log.checkpoint import read_int, write_int

BLOCK = 1000


class ProducerIdAllocator:
    def __init__(self, path: Path, broker_id: int) -> None:
        self.path = path
        self.broker_id = broker_id
        self._next = 0
        self._limit = 0

    def next(self) -> int:
        if self._next >= self._limit:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            start = read_int(self.path, 0)
            self._next, self._limit = start, start + BLOCK
            write_int(self.path, self._limit)
        pid = (self.broker_id << 40) | self._next
        self._next += 1
        return pid
