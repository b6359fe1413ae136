"""The aborted-transaction index of one partition replica: what read_committed fetches must skip.

A read_committed consumer receives aborted records like any others and drops them itself; the fetch
response names the aborted transactions that overlap the fetched range (producer id, first offset),
and the consumer skips that producer's batches from the first offset up to its ABORT marker. This
index answers that question without reading the log.

One entry per aborted, non-empty transaction, in marker order: (producer id, first offset, last
offset = the ABORT marker's offset, LSO then). The LSO then — the first offset still open once this
transaction closed — ends a search early: every transaction aborted later was open at that moment or
began after it, so it cannot begin below that offset (Kafka's `AbortedTxn.lastStableOffset`).

Our design (Kafka keeps a `.txnindex` per segment): one file per replica, `aborted-txn-index`, of
32-byte big-endian records, appended as markers are written, held in memory as a list sorted by
marker offset. It follows the log: truncation drops the entries whose marker it removes; recovery
drops entries past the recovered log end (a torn tail), and the producer-state replay after the last
snapshot appends any the file missed (the file is flushed before every snapshot, so entries below a
snapshot are on disk). A partial trailing record (a torn write) is cut on open.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

_ENTRY = struct.Struct(">qqqq")
FILE = "aborted-txn-index"


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class AbortedTxnIndex:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        whole = len(data) - len(data) % _ENTRY.size
        self.entries = [AbortedTxn(*_ENTRY.unpack_from(data, i)) for i in range(0, whole, _ENTRY.size)]
        self._lasts = [e.last_offset for e in self.entries]
        if whole != len(data):
            os.ftruncate(self._fd, whole)

    def append(self, e: AbortedTxn) -> None:
        """Add an entry for a marker beyond every entry held (a replayed one already held is skipped)."""
        if self._lasts and e.last_offset <= self._lasts[-1]:
            return
        os.pwrite(self._fd, _ENTRY.pack(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset),
                  len(self.entries) * _ENTRY.size)
        self.entries.append(e)
        self._lasts.append(e.last_offset)

    def truncate_from(self, offset: int) -> None:
        """Forget the entries whose marker is at or after `offset` (the log was cut there)."""
        i = bisect.bisect_left(self._lasts, offset)
        if i < len(self.entries):
            del self.entries[i:], self._lasts[i:]
            os.ftruncate(self._fd, i * _ENTRY.size)

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions that hold offsets in [fetch_offset, upper_bound)."""
        out = []
        for i in range(bisect.bisect_left(self._lasts, fetch_offset), len(self.entries)):
            e = self.entries[i]
            if e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                break
        return out

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
