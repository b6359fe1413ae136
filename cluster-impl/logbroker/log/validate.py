"""What a leader checks in a producer's record batches before any of them reaches the log.

The log stores batches as clients send them and consumers decode them, so a batch the broker
cannot read itself is one every consumer will stop at for good (librdkafka: "Decompression (codec
0x7) ... failed", "Invalid compressed data"). Like Kafka's LogValidator, each batch must:
- frame correctly and carry a correct CRC (`batch.iter_batches`) — CORRUPT_MESSAGE;
- use a codec we know (none, gzip, snappy, lz4, zstd) — UNSUPPORTED_COMPRESSION_TYPE;
- decompress, and hold exactly `recordCount` records whose offset deltas run 0, 1, 2, ... up to
  `lastOffsetDelta` — CORRUPT_MESSAGE (a header claiming 999 records for 2 would otherwise move the
  high watermark past offsets nobody can read);
- start at base offset 0 and not be a control batch (only brokers write those, on WriteTxnMarkers)
  — INVALID_RECORD;
- if transactional, carry a producer id, epoch and base sequence (the producer state needs them to
  know whose transaction the records belong to) — INVALID_RECORD, as Kafka.
A request is all or nothing per partition: one bad batch refuses the partition's whole record set.

Decompression is bounded where the codec says its size up front (snappy) or streams (gzip); lz4 and
zstd frames are decompressed whole (their libraries offer no bound), at most `message.max.bytes`
of input.
"""

from __future__ import annotations

import struct
import zlib

from logbroker.log.batch import HEADER_SIZE, BatchHeader, CorruptBatch, iter_batches
from logbroker.protocol.errors import Err

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
MAX_DECOMPRESSED = 256 << 20
_XERIAL = b"\x82SNAPPY\x00"


class Refused(Exception):
    """A batch the leader will not append: the partition's error code and a message for the client."""

    def __init__(self, error: Err, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error, self.message = error, message


def validate(records: bytes | memoryview) -> list[BatchHeader]:
    """Every batch's header if all of them pass; otherwise `Refused` with the first problem."""
    try:
        found = list(iter_batches(records))
    except CorruptBatch as e:
        raise Refused(Err.CORRUPT_MESSAGE, str(e)) from None
    if not found:
        raise Refused(Err.CORRUPT_MESSAGE, "empty record set")
    for pos, h in found:
        check_batch(records, pos, h)
    return [h for _, h in found]


def check_batch(buf: bytes | memoryview, pos: int, h: BatchHeader) -> None:
    codec = h.attributes & 0x07
    if codec not in CODECS:
        raise Refused(Err.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")
    if h.is_control:
        raise Refused(Err.INVALID_RECORD, "control batches are written by brokers, not clients")
    if h.is_transactional and (h.producer_id < 0 or h.producer_epoch < 0 or h.base_sequence < 0):
        raise Refused(Err.INVALID_RECORD, "a transactional batch needs a producer id, epoch and sequence")
    if h.base_offset != 0:
        raise Refused(Err.INVALID_RECORD, f"a client batch starts at base offset 0, not {h.base_offset}")
    if h.record_count <= 0 or h.record_count != h.last_offset_delta + 1:
        raise Refused(Err.CORRUPT_MESSAGE,
                      f"record count {h.record_count} does not match last offset delta {h.last_offset_delta}")
    body = bytes(buf[pos + HEADER_SIZE: pos + h.size])
    if codec != NONE:
        try:
            body = decompress(codec, body)
        except Exception as e:  # each library raises its own types on garbage
            raise Refused(Err.CORRUPT_MESSAGE, f"{CODECS[codec]} records do not decompress: {e}") from None
    problem = walk_records(body, h.record_count)
    if problem is not None:
        raise Refused(Err.CORRUPT_MESSAGE, problem)


def decompress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        d = zlib.decompressobj(wbits=47)  # gzip or zlib header
        out = d.decompress(data, MAX_DECOMPRESSED)
        if d.unconsumed_tail or not d.eof:
            raise ValueError("truncated or oversized gzip stream")
        return out
    import cramjam

    if codec == SNAPPY:
        return _snappy(data, cramjam)
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"codec {codec}")


def _snappy(data: bytes, cramjam: object) -> bytes:
    """Raw snappy (librdkafka) or the xerial block framing of Java's snappy-java."""
    snappy = cramjam.snappy  # type: ignore[attr-defined]
    if not data.startswith(_XERIAL):
        if snappy.decompress_raw_len(data) > MAX_DECOMPRESSED:
            raise ValueError("snappy block too large")
        return bytes(snappy.decompress_raw(data))
    out = bytearray()
    pos = 16  # magic (8), version (4), compatible version (4)
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("truncated xerial block length")
        (n,) = struct.unpack_from(">i", data, pos)
        if n < 0 or pos + 4 + n > len(data):
            raise ValueError("xerial block runs past the end")
        block = data[pos + 4: pos + 4 + n]
        if len(out) + snappy.decompress_raw_len(block) > MAX_DECOMPRESSED:
            raise ValueError("snappy stream too large")
        out += bytes(snappy.decompress_raw(block))
        pos += 4 + n
    return bytes(out)


def _varint(b: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (the record format's) and the position after it."""
    shift = result = 0
    while True:
        if pos >= len(b) or shift > 63:
            raise IndexError
        byte = b[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def walk_records(b: bytes, count: int) -> str | None:
    """None if `b` is exactly `count` well-framed records with offset deltas 0..count-1, else why not.

    Each record: length, attributes, timestampDelta, offsetDelta, key, value, headers — all
    varint-framed; a record must use exactly its length, and the batch exactly its records. Stricter
    than Kafka where readers trip: record attributes (unused) must be 0 — kafka-python reads them as
    a varint —, header keys must be UTF-8 strings, as the protocol says, and a length below -1 (null)
    is malformed — librdkafka stops at such a record for good, without an error. Runs on
    every produce, so one-byte varints (nearly all of them) take an inline fast path."""
    pos = n = 0
    size = len(b)
    try:
        while pos < size:
            x = b[pos]
            if x < 0x80:
                length, start = (x >> 1) ^ -(x & 1), pos + 1
            else:
                length, start = _varint(b, pos)
            end = start + length
            if length < 6 or end > size:  # 6: the smallest possible record
                return f"record {n} has a bad length {length}"
            if b[start]:
                return f"record {n} has attributes {b[start]}; they are unused and must be 0"
            x = b[start + 1]  # after attributes: the timestamp delta
            p = start + 2 if x < 0x80 else _varint(b, start + 1)[1]
            x = b[p]
            if x < 0x80:
                delta, p = (x >> 1) ^ -(x & 1), p + 1
            else:
                delta, p = _varint(b, p)
            if delta != n:
                return f"record {n} has offset delta {delta}"
            for _ in range(2):  # key, value
                x = b[p]
                if x < 0x80:
                    ln, p = (x >> 1) ^ -(x & 1), p + 1
                else:
                    ln, p = _varint(b, p)
                if ln > 0:
                    p += ln
                elif ln < -1:
                    return f"record {n} has a key or value length of {ln}"
            x = b[p]
            if x < 0x80:
                headers, p = (x >> 1) ^ -(x & 1), p + 1
            else:
                headers, p = _varint(b, p)
            if headers < 0 or headers > length:
                return f"record {n} has {headers} headers"
            for _ in range(headers):
                ln, p = _varint(b, p)
                if ln < 0:
                    return f"record {n} has a null header key"
                try:
                    b[p: p + ln].decode()
                except UnicodeDecodeError:
                    return f"record {n} has a header key that is not UTF-8"
                p += ln
                ln, p = _varint(b, p)
                if ln > 0:
                    p += ln
                elif ln < -1:
                    return f"record {n} has a header value length of {ln}"
            if p != end:
                return f"record {n} is {p - start} bytes inside a length of {length}"
            pos = end
            n += 1
            if n > count:
                break
    except IndexError:
        return f"record {n} is truncated"
    if n != count or pos != size:
        return f"the batch holds {n}{'+' if n > count else ''} records, its header says {count}"
    return None
