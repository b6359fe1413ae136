"""One segment: an append-only file of raw batches plus its offset index.

The index lives in memory (base offset, last offset, file position per batch) and on disk as
`<base>.index` (16 bytes per batch: base offset, last offset delta, position). Recovery of the
active segment rebuilds it from the log file itself, so a torn index never matters there. A rolled
segment was fsynced (log and index) when the log moved past it, so its recovery reads the index
instead of the whole file (`load_index`), as Kafka recovers only from its recovery point; an index
that does not describe its file exactly (sizes, contiguous offsets, the last batch's header) sends
the segment through the full recovery after all.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from logbroker.log.batch import HEADER_SIZE, BatchHeader, CorruptBatch, crc_ok, parse_header

_IDX = struct.Struct(">qii")


@dataclass
class Segment:
    base_offset: int
    log_path: Path
    index_path: Path
    size: int = 0
    #: bytes of the log file this process's last fsync covered, and the smallest size the file had
    #: since it was opened (what the simulator's disk model needs to know what a power loss keeps)
    durable: int = 0
    low: int = 0
    bases: list[int] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    _fd: int = -1
    _idx_fd: int = -1

    @classmethod
    def open(cls, directory: Path, base_offset: int) -> Segment:
        seg = cls(base_offset, directory / f"{base_offset:020d}.log", directory / f"{base_offset:020d}.index")
        seg._fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        seg._idx_fd = os.open(seg.index_path, os.O_RDWR | os.O_CREAT, 0o644)
        return seg

    # --- recovery ------------------------------------------------------------------------------
    def recover(self) -> int:
        """Re-validate every batch (framing and CRC); truncate a torn or corrupt tail. Returns the
        bytes truncated."""
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        pos = 0
        self.bases, self.lasts, self.positions = [], [], []
        while pos < len(data):
            try:
                h = parse_header(data, pos)
                if pos + h.size > len(data) or not crc_ok(data, pos, h):
                    break
            except CorruptBatch:
                break
            self._remember(h, pos)
            pos += h.size
        cut = len(data) - pos
        if cut:
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self.size = self.low = pos
        self.durable = pos if cut else 0  # recovery fsyncs only when it cut a torn tail
        self._rewrite_index()
        return cut

    def load_index(self) -> bool:
        """Take a rolled segment's index as its truth if it matches the file: every batch contiguous
        from the segment's base offset, and the last one's header (read from the file) ending the file.
        False (nothing changed) if it does not."""
        raw = os.pread(self._idx_fd, os.fstat(self._idx_fd).st_size, 0)
        size = os.fstat(self._fd).st_size
        if not raw or len(raw) % _IDX.size:
            return False
        bases: list[int] = []
        lasts: list[int] = []
        positions: list[int] = []
        expect_base = self.base_offset
        for base, delta, pos in _IDX.iter_unpack(raw):
            if base != expect_base or delta < 0 or (positions and pos <= positions[-1]) or (not positions and pos):
                return False
            bases.append(base)
            lasts.append(base + delta)
            positions.append(pos)
            expect_base = base + delta + 1
        try:
            last = parse_header(os.pread(self._fd, HEADER_SIZE, positions[-1]))
        except CorruptBatch:
            return False
        if last.base_offset != bases[-1] or last.last_offset != lasts[-1] or positions[-1] + last.size != size:
            return False
        self.bases, self.lasts, self.positions = bases, lasts, positions
        self.size = self.low = size
        self.durable = 0
        return True

    def _rewrite_index(self) -> None:
        os.ftruncate(self._idx_fd, 0)
        blob = b"".join(
            _IDX.pack(b, last - b, p) for b, last, p in zip(self.bases, self.lasts, self.positions, strict=True)
        )
        if blob:
            os.pwrite(self._idx_fd, blob, 0)

    def _remember(self, h: BatchHeader, pos: int) -> None:
        self.bases.append(h.base_offset)
        self.lasts.append(h.last_offset)
        self.positions.append(pos)

    # --- append / read / truncate --------------------------------------------------------------
    def append(self, h: BatchHeader, batch: bytes) -> None:
        os.pwrite(self._fd, batch, self.size)
        os.pwrite(self._idx_fd, _IDX.pack(h.base_offset, h.last_offset_delta, self.size), len(self.bases) * _IDX.size)
        self._remember(h, self.size)
        self.size += len(batch)

    def find(self, offset: int) -> int | None:
        """Index (into bases) of the first batch whose last offset >= `offset`, or None."""
        i = bisect.bisect_left(self.lasts, offset)
        return i if i < len(self.lasts) else None

    def read_from(self, i: int, max_bytes: int, upper_bound: int, *, min_one: bool) -> bytes:
        """Whole batches from batch index `i` whose last offset < upper_bound, up to max_bytes."""
        start = self.positions[i]
        end = start
        j = i
        while j < len(self.bases) and self.lasts[j] < upper_bound:
            nxt = self.positions[j + 1] if j + 1 < len(self.positions) else self.size
            if nxt - start > max_bytes and not (min_one and j == i):
                break
            end = nxt
            j += 1
        return os.pread(self._fd, end - start, start) if end > start else b""

    def truncate_before_batch(self, i: int) -> None:
        """Drop batch `i` and everything after it."""
        pos = self.positions[i] if i < len(self.positions) else self.size
        del self.bases[i:], self.lasts[i:], self.positions[i:]
        os.ftruncate(self._fd, pos)
        os.ftruncate(self._idx_fd, i * _IDX.size)
        self.size = pos
        self.durable = min(self.durable, pos)
        self.low = min(self.low, pos)

    def read_all(self) -> bytes:
        return os.pread(self._fd, self.size, 0)

    def flush(self) -> None:
        os.fsync(self._fd)
        os.fsync(self._idx_fd)
        self.durable = self.size

    @property
    def next_offset(self) -> int:
        return self.lasts[-1] + 1 if self.lasts else self.base_offset

    def close(self) -> None:
        for fd in (self._fd, self._idx_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._idx_fd = -1

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.index_path.unlink(missing_ok=True)
