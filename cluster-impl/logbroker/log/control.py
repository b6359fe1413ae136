"""Control batches: the COMMIT/ABORT markers that end a producer's transaction in a partition.

Only brokers write them (a client's control batch is refused in `validate.py`), on the coordinator's
WriteTxnMarkers. Layout, as the Kafka protocol defines it: a v2 batch with the transactional (0x10)
and control (0x20) attribute bits, the producer's id and epoch, base sequence -1, and one record
whose key is `version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)` and whose value is
`version int16 (0) | coordinator epoch int32`. Consumers never hand these records to applications;
a read_committed consumer uses the ABORT marker to know where a producer's aborted records end.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from logbroker.log.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from logbroker.log.validate import _varint as read_varint

TRANSACTIONAL, CONTROL = 0x10, 0x20
ABORT, COMMIT = 0, 1
_HDR_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class ControlMarker:
    commit: bool
    coordinator_epoch: int


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def marker_batch(producer_id: int, producer_epoch: int, marker: ControlMarker, timestamp: int) -> bytes:
    """A control batch at base offset 0 (the leader stamps offset and leader epoch on append)."""
    key = _KEY.pack(0, COMMIT if marker.commit else ABORT)
    value = _VALUE.pack(0, marker.coordinator_epoch)
    body = b"".join((b"\x00", _varint(0), _varint(0), _varint(len(key)), key, _varint(len(value)), value,
                     _varint(0)))
    record = _varint(len(body)) + body
    after_crc = _HDR_AFTER_CRC.pack(TRANSACTIONAL | CONTROL, 0, timestamp, timestamp, producer_id, producer_epoch,
                                    -1, 1) + record
    crc = crc32c.crc32c(after_crc)
    length = HEADER_SIZE - LOG_OVERHEAD + len(record)
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + after_crc


def read_marker(batch: bytes | memoryview, h: BatchHeader) -> ControlMarker | None:
    """The marker a control batch carries, or None if its record is not a COMMIT/ABORT marker we know
    (Kafka skips unknown control types; so do we). `batch` starts at the batch's first byte."""
    if not h.is_control or h.record_count < 1 or h.attributes & 0x07:
        return None
    b = bytes(batch[HEADER_SIZE: h.size])
    try:
        pos = read_varint(b, 0)[1] + 1  # record length, attributes
        pos = read_varint(b, pos)[1]  # timestamp delta
        pos = read_varint(b, pos)[1]  # offset delta
        klen, pos = read_varint(b, pos)
        if klen < _KEY.size:
            return None
        version, kind = _KEY.unpack_from(b, pos)
        pos += klen
        vlen, pos = read_varint(b, pos)
        if version != 0 or kind not in (ABORT, COMMIT) or vlen < _VALUE.size:
            return None
        _, coordinator_epoch = _VALUE.unpack_from(b, pos)
    except (IndexError, struct.error):
        return None
    return ControlMarker(kind == COMMIT, coordinator_epoch)
