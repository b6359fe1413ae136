"""Producer state of one partition: per producer id its epoch, recent batches and open transaction.

Idempotence: the leader checks each batch's (producer id, epoch, base sequence): a batch it already
has is a duplicate (the client retried after a lost response) and gets its original offset back,
nothing appended; a gap in sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is
INVALID_PRODUCER_EPOCH (a fenced incarnation).

Transactions (KIP-98), as Kafka's ProducerStateManager: a producer's first transactional batch opens
its transaction here at that batch's offset; its COMMIT or ABORT marker (a control batch) closes it.
A closed transaction stays *unstable* until the high watermark passes its marker: were the marker
lost with a leader change, the transaction would be open again, so nothing of it may count as
decided before then. The first unstable offset bounds the last stable offset (LSO) that
read_committed consumers read up to. A marker from a coordinator older than the last one seen for
the producer is refused (TRANSACTION_COORDINATOR_FENCED: a zombie coordinator).

Every appended batch passes through `apply`, on the leader, on followers and when a log is replayed,
so every replica holds the same state and a follower that becomes leader knows the open
transactions and where they begin. State is saved in snapshots (`to_snapshot`) so that a restart or a
truncation replays only the batches after the latest one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from logbroker.log.batch import BatchHeader
from logbroker.log.control import ControlMarker
from logbroker.protocol.errors import Err

KEEP_BATCHES = 5  # Kafka keeps the last five batches per producer (max.in.flight <= 5)
INT32_MAX = 2**31 - 1


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=KEEP_BATCHES))
    # (first seq, last seq, base offset, last offset)
    coordinator_epoch: int = -1
    txn_first_offset: int = -1  # where its open transaction begins here; -1: none open
    last_timestamp: int = -1  # of its latest batch or marker (DescribeProducers)

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed: its first offset here and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class SeqCheck:
    error: Err
    duplicate_of: tuple[int, int] | None = None  # (base offset, last offset) of the original
    message: str | None = None


def next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.unreplicated: list[CompletedTxn] = []  # closed, marker not yet below the HW
        self.end_offset = 0  # offset after the last batch applied
        self._verified: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, token) (KIP-890)
        self._tokens = 0

    # --- the leader's checks -----------------------------------------------------------------------
    def check(self, h: BatchHeader) -> SeqCheck:
        """May the leader append this client data batch? (Not for control batches.)"""
        if h.producer_id < 0:
            return SeqCheck(Err.NONE)
        e = self.producers.get(h.producer_id)
        if e is None:
            return SeqCheck(Err.NONE if h.base_sequence == 0 else Err.OUT_OF_ORDER_SEQUENCE_NUMBER)
        if h.producer_epoch < e.epoch:
            return SeqCheck(Err.INVALID_PRODUCER_EPOCH, message=f"epoch {h.producer_epoch} of producer "
                            f"{h.producer_id} is older than its current epoch {e.epoch}")
        if h.producer_epoch > e.epoch:
            if h.base_sequence != 0:
                return SeqCheck(Err.OUT_OF_ORDER_SEQUENCE_NUMBER)
        else:
            for first, last, base, last_off in e.batches:
                if first == h.base_sequence and last == h.last_sequence:
                    return SeqCheck(Err.NONE, (base, last_off))
            if h.base_sequence != next_seq(e.last_seq):
                return SeqCheck(Err.OUT_OF_ORDER_SEQUENCE_NUMBER)
        if e.txn_first_offset >= 0 and not h.is_transactional:
            return SeqCheck(Err.INVALID_TXN_STATE, message=f"producer {h.producer_id} has a transaction open at "
                            f"offset {e.txn_first_offset}; a non-transactional write is not part of it")
        return SeqCheck(Err.NONE)

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int, *, strict_epoch: bool) -> Err:
        """May the leader append a marker? `strict_epoch`: a KIP-890 (transaction version 2) marker,
        whose epoch the coordinator bumped, so it must exceed the producer's epoch here (unless it is
        a retry of a marker already written: same epoch, nothing open)."""
        e = self.producers.get(producer_id)
        if e is None:
            return Err.NONE
        if epoch < e.epoch or (strict_epoch and epoch == e.epoch and e.txn_first_offset >= 0):
            return Err.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < e.coordinator_epoch:
            return Err.TRANSACTION_COORDINATOR_FENCED
        return Err.NONE

    def has_ongoing(self, producer_id: int, epoch: int) -> bool:
        e = self.producers.get(producer_id)
        return e is not None and e.txn_first_offset >= 0 and e.epoch == epoch

    # --- KIP-890 part 1: a verified producer may open a transaction here ------------------------------
    def begin_verification(self, producer_id: int, epoch: int) -> int:
        """A token for a verification about to be asked of the coordinator. A marker for the producer
        voids it (`apply`), so an answer that arrives after the transaction ended opens nothing."""
        got = self._verified.get(producer_id)
        if got is not None and got[0] == epoch:
            return got[1]
        self._tokens += 1
        self._verified[producer_id] = (epoch, self._tokens)
        return self._tokens

    def verified(self, producer_id: int, epoch: int, token: int) -> bool:
        return self._verified.get(producer_id) == (epoch, token)

    # --- every appended batch ------------------------------------------------------------------------
    def apply(self, h: BatchHeader, marker: ControlMarker | None = None) -> CompletedTxn | None:
        """Record an appended batch (leader, follower, or replayed from the log); for a marker, the
        transaction it closed, if one was open."""
        self.end_offset = max(self.end_offset, h.next_offset)
        if h.producer_id < 0:
            return None
        e = self.producers.get(h.producer_id)
        if e is None:
            e = self.producers[h.producer_id] = ProducerEntry(h.producer_epoch)
        elif h.producer_epoch > e.epoch:  # a new epoch forgets the batches, not an open transaction
            e.epoch = h.producer_epoch
            e.batches.clear()
        e.last_timestamp = max(e.last_timestamp, h.max_timestamp)
        if h.is_control:
            return self._end_txn(h, e, marker)
        e.batches.append((h.base_sequence, h.last_sequence, h.base_offset, h.last_offset))
        if h.is_transactional and e.txn_first_offset < 0:
            e.txn_first_offset = h.base_offset
            self.ongoing[h.producer_id] = h.base_offset
        return None

    def _end_txn(self, h: BatchHeader, e: ProducerEntry, marker: ControlMarker | None) -> CompletedTxn | None:
        self._verified.pop(h.producer_id, None)
        if marker is None:  # a control batch of a kind we do not know: as Kafka, it ends nothing
            return None
        e.coordinator_epoch = max(e.coordinator_epoch, marker.coordinator_epoch)
        if e.txn_first_offset < 0:
            return None  # an empty transaction (or a retried marker): nothing to close here
        done = CompletedTxn(h.producer_id, e.txn_first_offset, h.base_offset, not marker.commit)
        e.txn_first_offset = -1
        del self.ongoing[h.producer_id]
        self.unreplicated.append(done)
        return done

    # --- the last stable offset ----------------------------------------------------------------------
    def first_unstable(self, hw: int) -> int | None:
        """The first offset of a transaction still open, or closed by a marker at or above `hw`."""
        if self.unreplicated and self.unreplicated[0].last_offset < hw:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= hw]
        first = min(self.ongoing.values(), default=None)
        for t in self.unreplicated:
            if first is None or t.first_offset < first:
                first = t.first_offset
        return first

    def lso_after(self, done: CompletedTxn) -> int:
        """The first unstable offset once `done` closed, counting open transactions only (Kafka's
        `lastStableOffset(completedTxn)`, kept in the aborted-transaction index to end a search)."""
        return min(self.ongoing.values(), default=done.last_offset + 1)

    # --- snapshots -----------------------------------------------------------------------------------
    def to_snapshot(self) -> dict[str, Any]:
        return {
            "version": 1, "end_offset": self.end_offset,
            "producers": [[pid, e.epoch, e.coordinator_epoch, e.txn_first_offset, e.last_timestamp,
                           [list(b) for b in e.batches]] for pid, e in sorted(self.producers.items())],
            "unreplicated": [[t.producer_id, t.first_offset, t.last_offset, t.aborted] for t in self.unreplicated],
        }

    @classmethod
    def from_snapshot(cls, doc: dict[str, Any]) -> ProducerStateTable:
        if doc.get("version") != 1:
            raise ValueError(f"unknown producer snapshot version {doc.get('version')!r}")
        t = cls()
        t.end_offset = int(doc["end_offset"])
        for pid, epoch, coord, first, ts, batches in doc["producers"]:
            e = t.producers[int(pid)] = ProducerEntry(int(epoch), coordinator_epoch=int(coord),
                                                      txn_first_offset=int(first), last_timestamp=int(ts))
            e.batches.extend((int(a), int(b), int(c), int(d)) for a, b, c, d in batches)
            if e.txn_first_offset >= 0:
                t.ongoing[int(pid)] = e.txn_first_offset
        t.unreplicated = [CompletedTxn(int(p), int(f), int(last), bool(a)) for p, f, last, a in doc["unreplicated"]]
        return t
