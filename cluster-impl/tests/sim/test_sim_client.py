"""The simulated client's record reader agrees with kafka-python's on what the producer writes."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from logbroker.log.batch import iter_batches, with_offset_and_epoch
from logsim.client import decode_records


def _batch(values: list[int], base: int, compression: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False, producer_id=7,
                                  producer_epoch=0, base_sequence=0, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=1_800_000_000_000 + i, key=None, value=str(v).encode(), headers=[])
    return with_offset_and_epoch(bytes(b.build()), base, 3)


def test_decode_records_matches_kafka_python() -> None:
    data = _batch([1, 2_000_000_123, -5], 0) + _batch(list(range(200)), 3) + _batch([9, 10], 203, compression=1)
    reference = [(r.offset, int(r.value)) for pos, h in iter_batches(data)
                 for r in DefaultRecordBatch(bytes(data[pos:pos + h.size]))]
    assert decode_records(data) == reference
    assert [o for o, _ in reference] == list(range(205))
