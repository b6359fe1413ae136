"""Produce v0–2 and Fetch v0–3: the versions before record batch v2, through kafka-python's old codec.

Why serve them: librdkafka before 2.13 (Debian's kcat 1.7.1 has 2.0.2) compresses with gzip, snappy
or lz4 only if the broker's Produce range reaches down to v0 — it checks that the request version
range [0, 0] overlaps ours — and otherwise sends uncompressed without a word. Such a client still
produces with v3+ and record batch v2; a genuinely old client sends message sets of magic 0 or 1.

The log stores v2 batches only, so:
- Produce v0–2: a message set of magic 0/1 is converted into one uncompressed v2 batch (offsets,
  timestamps, keys and values kept) before the usual validation; v2 batches pass as they are.
- Fetch v0–3: the v2 batches read from the log are converted into an uncompressed message set of
  magic 0 (Fetch v0–1) or 1 (v2–3), as Kafka down-converts for old consumers.
The request and response objects of the old codec use tuples for nested structures; `decode`
returns plain namespaces with the attribute names the core reads, and `encode` takes the core's
response dicts.
"""

from __future__ import annotations

import struct
from io import BytesIO
from types import SimpleNamespace
from typing import Any

from kafka.protocol.old import fetch as old_fetch
from kafka.protocol.old import produce as old_produce
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from logbroker.log.batch import HEADER_SIZE, CorruptBatch, iter_batches

OLDEST = {0: 3, 1: 4}  # the first version kafka-python's current codec has, per API key


def is_legacy(key: int, version: int) -> bool:
    return key in OLDEST and version < OLDEST[key]


def _request_cls(key: int, version: int) -> Any:
    return getattr(old_produce if key == 0 else old_fetch,
                   f"{'Produce' if key == 0 else 'Fetch'}Request_v{version}")


def _response_cls(key: int, version: int) -> Any:
    return getattr(old_produce if key == 0 else old_fetch,
                   f"{'Produce' if key == 0 else 'Fetch'}Response_v{version}")


def decode(key: int, version: int, frame: bytes) -> Any:
    """A request in the shape the core reads (header: api key, version, correlation id, client id)."""
    (client_len,) = struct.unpack_from(">h", frame, 8)
    body = BytesIO(frame[10 + max(client_len, 0):])
    req = _request_cls(key, version).decode(body)
    if body.read(1):
        raise ValueError("trailing bytes after the request")
    if key == 0:
        return SimpleNamespace(acks=req.acks, timeout_ms=req.timeout_ms, transactional_id=None, topic_data=[
            SimpleNamespace(name=name, partition_data=[SimpleNamespace(index=i, records=up_convert(r))
                                                       for i, r in parts])
            for name, parts in req.topic_data])
    return SimpleNamespace(
        replica_id=req.replica_id, max_wait_ms=req.max_wait_ms, min_bytes=req.min_bytes,
        max_bytes=getattr(req, "max_bytes", 2**31 - 1), topics=[
            SimpleNamespace(topic=topic, partitions=[
                SimpleNamespace(partition=p, fetch_offset=off, partition_max_bytes=mx, current_leader_epoch=-1)
                for p, off, mx in parts])
            for topic, parts in req.topics])


def encode(key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    if key == 0:
        topics = [(t["name"], [(p["index"], p["error_code"], p["base_offset"], *([-1] if version >= 2 else []))
                               for p in t["partition_responses"]]) for t in body["responses"]]
        resp = _response_cls(0, version)(responses=topics, **({"throttle_time_ms": 0} if version >= 1 else {}))
    else:
        magic = 0 if version < 2 else 1
        topics = [(t["topic"], [(p["partition_index"], p["error_code"], p["high_watermark"],
                                 down_convert(p["records"] or b"", magic)) for p in t["partitions"]])
                  for t in body["responses"]]
        resp = _response_cls(1, version)(responses=topics, **({"throttle_time_ms": 0} if version >= 1 else {}))
    payload = struct.pack(">i", correlation_id) + resp.encode()
    return struct.pack(">i", len(payload)) + payload


def up_convert(records: bytes | None) -> bytes | None:
    """A magic 0/1 message set as one uncompressed v2 batch; anything else unchanged (and refused
    later if it is not a valid v2 batch)."""
    if not records or len(records) < 17 or records[16] not in (0, 1):
        return records
    try:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
        pos, delta = 0, 0
        while pos < len(records):
            (size,) = struct.unpack_from(">i", records, pos + 8)
            for rec in LegacyRecordBatch(records[pos: pos + 12 + size], records[pos + 16]):
                ts = rec.timestamp if rec.timestamp is not None and rec.timestamp >= 0 else None
                builder.append(delta, timestamp=ts, key=rec.key, value=rec.value, headers=[])
                delta += 1
            pos += 12 + size
        return bytes(builder.build()) if delta else records
    except Exception:  # a broken message set: leave it to validation, which refuses it
        return records


def down_convert(records: bytes, magic: int) -> bytes:
    """v2 batches as an uncompressed message set of `magic`, with absolute offsets."""
    if not records:
        return records
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=2**31 - 1)
    try:
        for pos, h in iter_batches(records, verify_crc=False):
            raw = records[pos: pos + h.size]
            codec = h.attributes & 0x07
            if codec:
                from logbroker.log.validate import decompress

                plain = bytearray(raw[:HEADER_SIZE]) + decompress(codec, raw[HEADER_SIZE:])
                struct.pack_into(">i", plain, 8, len(plain) - 12)
                struct.pack_into(">h", plain, 21, h.attributes & ~0x07)
                raw = bytes(plain)
            for rec in DefaultRecordBatch(raw):
                builder.append(rec.offset, timestamp=rec.timestamp if magic else None, key=rec.key, value=rec.value)
    except CorruptBatch:
        pass
    return bytes(builder.build())
