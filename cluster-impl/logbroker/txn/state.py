"""One transactional id's state machine (KIP-98, Kafka's TransactionMetadata); pure, time passed in.

    Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲  ▲                               │  └─────EndTxn(abort), timeout──▶ PrepareAbort ──markers──▶ CompleteAbort
      │  └── InitProducerId (epoch + 1) ─┴─ (Ongoing: fence — epoch + 1, abort first, CONCURRENT_TRANSACTIONS)
      └──────────────── AddPartitions after Complete* starts the next transaction ──────────────────┘

Every transition is a new `TxnMeta` value that the coordinator writes to `__transaction_state` and
adopts only once the write is replicated; while a write (or a transaction's markers) is in flight,
requests for the id are answered CONCURRENT_TRANSACTIONS, so the client retries. Errors are
Kafka's: INVALID_PRODUCER_ID_MAPPING (no such producer for the id), PRODUCER_FENCED (an older epoch:
another incarnation took over; clients of an API version before PRODUCER_FENCED learn
INVALID_PRODUCER_EPOCH instead, which the coordinator maps), INVALID_TXN_STATE (e.g. EndTxn with no
transaction).

KIP-890 part 2 (`tv2`: the client's EndTxn is v5+, and `transaction.kip890.enable`): EndTxn bumps
the epoch; PrepareCommit/PrepareAbort carry the bumped epoch, the markers are written with it, and
the EndTxn answer hands it back, so a late write of the ended transaction is fenced at its
partitions. A client of an older EndTxn cannot learn a new epoch from the answer (it would be fenced
by its own coordinator), so for it nothing is bumped — Kafka's TV_0, what librdkafka, aiokafka and
kafka-python speak. A retried TV2 EndTxn is recognised by its epoch being one below ours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from logbroker.core.names import TopicPartition
from logbroker.protocol.errors import Err

NO_PRODUCER_ID, NO_EPOCH = -1, -1
EPOCH_EXHAUSTED = 32766  # Short.MaxValue - 1: a new producer id instead of another bump (InitProducerId)


class TxnState(StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class TxnMeta:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int  # the epoch before the last bump (a retried InitProducerId / TV2 EndTxn)
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1  # when the transaction began (its first partition); -1 when none is open
    update_ms: int = -1
    tv2: bool = False  # this transaction's end bumps the epoch (KIP-890 part 2)

    @property
    def commit(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)

    # --- the record in __transaction_state ---------------------------------------------------------
    def to_record(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "last_producer_epoch": self.last_producer_epoch, "timeout_ms": self.timeout_ms,
                "state": self.state.value, "partitions": sorted([tp.topic, tp.partition] for tp in self.partitions),
                "start_ms": self.start_ms, "update_ms": self.update_ms, "tv2": self.tv2}

    @classmethod
    def from_record(cls, transactional_id: str, v: dict[str, Any]) -> TxnMeta:
        return cls(transactional_id, int(v["producer_id"]), int(v["producer_epoch"]), int(v["last_producer_epoch"]),
                   int(v["timeout_ms"]), TxnState(v["state"]),
                   frozenset(TopicPartition(str(t), int(p)) for t, p in v["partitions"]), int(v["start_ms"]),
                   int(v["update_ms"]), bool(v["tv2"]))


@dataclass
class Entry:
    """A transactional id as the coordinator holds it: the adopted state, and what is in flight."""

    meta: TxnMeta
    pending: bool = False  # a write to __transaction_state is in flight
    fence_failed: bool = False  # a fencing bump was not written: do not bump again (Kafka's hasFailedEpochFence)

    @property
    def busy(self) -> bool:
        """Another request must wait (CONCURRENT_TRANSACTIONS): a write or the markers are in flight."""
        return self.pending or self.meta.state.preparing


Outcome = TxnMeta | Err  # a transition to write, or the answer (Err.NONE: nothing to write)


def new_producer(transactional_id: str, producer_id: int, timeout_ms: int, now: int) -> TxnMeta:
    """An id seen for the first time: no epoch yet, so InitProducerId's bump makes it 0."""
    return TxnMeta(transactional_id, producer_id, NO_EPOCH, NO_EPOCH, timeout_ms, TxnState.EMPTY, update_ms=now)


def init_producer(e: Entry, timeout_ms: int, expected: tuple[int, int] | None, now: int,
                  new_producer_id: Callable[[], int]) -> Outcome | str:
    """InitProducerId for an existing id; "fence" when an open transaction must be aborted first
    (the caller fences and aborts, then answers CONCURRENT_TRANSACTIONS so the client asks again).
    `expected`: the (producer id, epoch) of a v3+ client resuming after an error."""
    m = e.meta
    if e.busy:
        return Err.CONCURRENT_TRANSACTIONS
    if expected is not None and not (m.producer_epoch == NO_EPOCH or expected[0] == m.producer_id):
        return Err.PRODUCER_FENCED
    if m.state is TxnState.ONGOING:
        return "fence"
    if m.producer_epoch >= EPOCH_EXHAUSTED and (expected is None or expected[1] == m.producer_epoch):
        return replace(m, producer_id=new_producer_id(), producer_epoch=0,
                       last_producer_epoch=m.producer_epoch if expected is not None else NO_EPOCH,
                       timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1,
                       update_ms=now, tv2=False)
    if expected is None or m.producer_epoch == NO_EPOCH or expected[1] == m.producer_epoch:
        epoch, last = m.producer_epoch + 1, (m.producer_epoch if expected is not None else NO_EPOCH)
    elif expected[1] == m.last_producer_epoch:  # a retry of a bump that succeeded
        epoch, last = m.producer_epoch, m.last_producer_epoch
    else:
        return Err.PRODUCER_FENCED
    return replace(m, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms, state=TxnState.EMPTY,
                   partitions=frozenset(), start_ms=-1, update_ms=now, tv2=False)


def fence_and_abort(e: Entry, now: int) -> TxnMeta:
    """The coordinator's own abort of an open transaction (InitProducerId of a new incarnation, or
    the transaction's timeout): PrepareAbort with the epoch bumped, so the markers fence the old
    producer's late writes at every partition and its next request is PRODUCER_FENCED. If an earlier
    fencing write failed, its bump is not repeated (Kafka's hasFailedEpochFence)."""
    m = e.meta
    epoch = m.producer_epoch if e.fence_failed else m.producer_epoch + 1
    return replace(m, producer_epoch=epoch, last_producer_epoch=NO_EPOCH, state=TxnState.PREPARE_ABORT,
                   update_ms=now, tv2=False)


def check_producer(m: TxnMeta, producer_id: int, producer_epoch: int) -> Err:
    if m.producer_id != producer_id:
        return Err.INVALID_PRODUCER_ID_MAPPING
    if m.producer_epoch != producer_epoch:
        return Err.PRODUCER_FENCED
    return Err.NONE


def add_partitions(e: Entry, producer_id: int, producer_epoch: int, tps: frozenset[TopicPartition],
                   now: int) -> Outcome:
    """AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the (maybe new) transaction."""
    m = e.meta
    err = check_producer(m, producer_id, producer_epoch)
    if err != Err.NONE:
        return err
    if e.busy:
        return Err.CONCURRENT_TRANSACTIONS
    if m.state is TxnState.ONGOING and tps <= m.partitions:
        return Err.NONE  # already in: nothing to write
    start = m.start_ms if m.state is TxnState.ONGOING else now
    return replace(m, state=TxnState.ONGOING, partitions=m.partitions | tps, start_ms=start, update_ms=now,
                   tv2=False)


def verify_partitions(e: Entry, producer_id: int, producer_epoch: int,
                      tps: list[TopicPartition]) -> Err | dict[TopicPartition, Err]:
    """KIP-890 part 1, asked by a partition leader: is each partition in the ongoing transaction?"""
    err = check_producer(e.meta, producer_id, producer_epoch)
    if err != Err.NONE:
        return err
    if e.meta.state.preparing:
        return Err.CONCURRENT_TRANSACTIONS
    ongoing = e.meta.state is TxnState.ONGOING
    return {tp: Err.NONE if ongoing and tp in e.meta.partitions else Err.TRANSACTION_ABORTABLE for tp in tps}


def end_txn(e: Entry, producer_id: int, producer_epoch: int, commit: bool, tv2: bool, now: int) -> Outcome:
    """EndTxn from the client. `tv2`: it may bump the epoch (EndTxn v5+, KIP-890 on)."""
    m = e.meta
    if m.producer_id != producer_id:
        return Err.INVALID_PRODUCER_ID_MAPPING
    if m.tv2 and (m.state.preparing or m.state.complete):
        valid = m.producer_epoch == producer_epoch + 1  # a retry carries the epoch from before its bump
    else:
        valid = producer_epoch == m.producer_epoch
    if not valid:
        return Err.PRODUCER_FENCED
    if e.pending:
        return Err.CONCURRENT_TRANSACTIONS
    if m.state is TxnState.ONGOING:
        bump = tv2 and m.producer_epoch < EPOCH_EXHAUSTED
        epoch, last = (m.producer_epoch + 1, m.producer_epoch) if bump else (m.producer_epoch, m.last_producer_epoch)
        return replace(m, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, producer_epoch=epoch,
                       last_producer_epoch=last, update_ms=now, tv2=bump)
    if m.state.complete:
        return Err.NONE if commit == m.commit else Err.INVALID_TXN_STATE  # a retry of a finished end
    if m.state.preparing:
        return Err.CONCURRENT_TRANSACTIONS if commit == m.commit else Err.INVALID_TXN_STATE
    return Err.INVALID_TXN_STATE  # Empty: no transaction to end


def complete(m: TxnMeta, now: int) -> TxnMeta:
    """Every marker is written: the transaction is over."""
    done = TxnState.COMPLETE_COMMIT if m.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return replace(m, state=done, partitions=frozenset(), update_ms=now)


def timed_out(m: TxnMeta, now: int) -> bool:
    return m.state is TxnState.ONGOING and m.start_ms >= 0 and now >= m.start_ms + m.timeout_ms
