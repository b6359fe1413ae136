"""Idempotent-producer state of one partition: per producer id, its epoch and recent batches.

The leader checks each batch's (producer id, epoch, base sequence): a batch it already has is a
duplicate (the client retried after a lost response) and gets its original offset back, nothing
appended; a gap in sequence is OUT_OF_ORDER_SEQUENCE_NUMBER. State is rebuilt from the log's
batch headers on start-up, so it survives restarts and follows truncation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from logbroker.log.batch import BatchHeader
from logbroker.protocol.errors import Err

KEEP_BATCHES = 5  # Kafka keeps the last five batches per producer (max.in.flight <= 5)
INT32_MAX = 2**31 - 1


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=KEEP_BATCHES))
    # (first seq, last seq, base offset, last offset)

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


@dataclass(frozen=True, slots=True)
class SeqCheck:
    error: Err
    duplicate_of: tuple[int, int] | None = None  # (base offset, last offset) of the original


def next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, h: BatchHeader) -> SeqCheck:
        if h.producer_id < 0:
            return SeqCheck(Err.NONE)
        e = self.producers.get(h.producer_id)
        if e is None:
            return SeqCheck(Err.NONE if h.base_sequence == 0 else Err.OUT_OF_ORDER_SEQUENCE_NUMBER)
        if h.producer_epoch < e.epoch:
            return SeqCheck(Err.INVALID_PRODUCER_EPOCH)
        if h.producer_epoch > e.epoch:
            return SeqCheck(Err.NONE if h.base_sequence == 0 else Err.OUT_OF_ORDER_SEQUENCE_NUMBER)
        for first, last, base, last_off in e.batches:
            if first == h.base_sequence and last == h.last_sequence:
                return SeqCheck(Err.NONE, (base, last_off))
        if h.base_sequence != next_seq(e.last_seq):
            return SeqCheck(Err.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return SeqCheck(Err.NONE)

    def update(self, h: BatchHeader) -> None:
        """Record an appended batch (leader or follower, or replayed from the log)."""
        if h.producer_id < 0:
            return
        e = self.producers.get(h.producer_id)
        if e is None or h.producer_epoch > e.epoch:
            e = self.producers[h.producer_id] = ProducerEntry(h.producer_epoch)
        e.batches.append((h.base_sequence, h.last_sequence, h.base_offset, h.last_offset))

    def rebuild(self, headers: list[BatchHeader]) -> None:
        self.producers.clear()
        for h in headers:
            self.update(h)
