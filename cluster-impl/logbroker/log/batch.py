"""Record batch v2 headers, read and patched in place (the Kafka protocol's RecordBatch layout).

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32 | records...

The CRC-32C covers attributes to the end, so a leader may set baseOffset and
partitionLeaderEpoch without recomputing it. We keep batches as raw bytes end to end: no decode
on the hot path, and followers store byte-identical copies.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
_HDR = struct.Struct(">qiibIhiqqqhii")


class CorruptBatch(ValueError):
    """A batch whose framing, magic or CRC is wrong."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    length: int  # batchLength: bytes after the length field
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.last_offset_delta if self.base_sequence >= 0 else -1


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatch(f"truncated batch header ({len(buf) - pos} bytes)")
    h = BatchHeader(*_HDR.unpack_from(buf, pos))
    if h.magic != 2:
        raise CorruptBatch(f"unsupported record batch magic {h.magic}")
    if h.length < HEADER_SIZE - LOG_OVERHEAD or h.last_offset_delta < 0:
        raise CorruptBatch(f"bad batch length {h.length} / last offset delta {h.last_offset_delta}")
    return h


def crc_ok(buf: bytes | memoryview, pos: int, h: BatchHeader) -> bool:
    return crc32c.crc32c(bytes(buf[pos + 21 : pos + h.size])) == h.crc


def iter_batches(buf: bytes | memoryview, *, verify_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch; raises CorruptBatch on garbage or a bad CRC."""
    pos = 0
    n = len(buf)
    while pos < n:
        h = parse_header(buf, pos)
        if pos + h.size > n:
            raise CorruptBatch(f"batch at {pos} runs past the end ({h.size} > {n - pos} bytes)")
        if verify_crc and not crc_ok(buf, pos, h):
            raise CorruptBatch(f"CRC mismatch in batch at position {pos}")
        yield pos, h
        pos += h.size


def with_offset_and_epoch(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """A copy of `batch` with its base offset and partition leader epoch set (CRC stays valid)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)
