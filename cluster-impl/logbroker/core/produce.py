"""Produce (API 0) on the leader: validate, check the producer, maybe verify, append, wait for the ISR.

Per partition, in order (the first failure answers the partition; nothing of it is appended):
unknown or not led here; empty or larger than `max.message.bytes`; a batch that fails validation
(`log/validate.py`); transactional records without a transactional id (Produce v3+ carries it) —
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers a producer it cannot authorize for one;
acks=all with the ISR below min.insync.replicas; then the producer state (`producer_state.py`):
a duplicate gets its original offsets back, an older epoch is INVALID_PRODUCER_EPOCH, a sequence gap
OUT_OF_ORDER_SEQUENCE_NUMBER, a non-transactional write while the producer's transaction is open here
INVALID_TXN_STATE.

KIP-890 part 1 (`txn_verify.py`, config `transaction.kip890.enable`): a transactional batch that would
open a transaction here waits until the coordinator confirms the partition is in the producer's
transaction; only then are its producer checks made and it is appended. The answer is asked before
the sequence check, so batches a producer pipelines behind its first one are checked in order after
it. A request whose verification is unanswered at its timeout answers NOT_ENOUGH_REPLICAS (a retry
may succeed), and a late answer appends nothing. The bug switch `no-txn-verification` skips the
question, as brokers before KIP-890 did.

acks=all answers once the HW covers the append (through the purgatory), acks=1 once written (after
any verification), acks=0 never.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from logbroker.core.leader_host import LeaderHost
from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.purgatory import Body, Deferred
from logbroker.core.reply import Reply
from logbroker.core.txn_verify import TxnVerifier
from logbroker.log.batch import BatchHeader
from logbroker.log.validate import Refused, validate
from logbroker.probes import probe
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)
_LEADERSHIP_MOVED = probe("produce-waiting-leadership-moved")
_TIMED_OUT = probe("produce-timed-out-in-purgatory")
_AFTER_APPEND = probe("produce-isr-shrank-after-append")
_NOT_ENOUGH = probe("produce-refused-not-enough-replicas")
_DUPLICATE = probe("produce-duplicate-batch")
_OUT_OF_ORDER = probe("produce-out-of-order-sequence")
_STALE_PRODUCER = probe("produce-stale-producer-epoch")
_OPENS_TXN = probe("txn-write-opens-transaction")
_NOT_IN_TXN = probe("txn-write-not-in-transaction")

Result = dict[str, Any]


@dataclass
class _Unverified:
    """A partition's records waiting for the coordinator's word before they may open a transaction."""

    p: Partition
    index: int
    records: bytes
    header: BatchHeader
    token: int


@dataclass
class _Request:
    """One produce request in flight: its results so far, the offsets the HW must reach, what still
    waits for verification."""

    acks: int
    results: dict[str, list[Result]]
    waits: list[tuple[Partition, int]] = field(default_factory=list)
    unverified: dict[TopicPartition, _Unverified] = field(default_factory=dict)
    finished: bool = False

    def set(self, tp: TopicPartition, res: Result) -> None:
        out = self.results[tp.topic]
        for i, r in enumerate(out):
            if r["index"] == tp.partition:
                out[i] = res


def result(index: int, err: Err, base: int = -1, log_start: int = -1, message: str | None = None) -> Result:
    return {"index": index, "error_code": int(err), "base_offset": base, "log_append_time_ms": -1,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}


def body_of(results: dict[str, list[Result]]) -> Body:
    return {"responses": [{"name": n, "partition_responses": r} for n, r in results.items()], "throttle_time_ms": 0}


class ProduceHandler:
    def __init__(self, core: LeaderHost, verifier: TxnVerifier, *, verify: bool) -> None:
        self.core = core
        self.verifier = verifier
        self.verify = verify

    def produce(self, version: int, req: Any) -> Reply:
        acks = req.acks
        if acks not in (-1, 0, 1):
            return Reply(version, body_of({t.name: [result(pd.index, Err.INVALID_REQUEST) for pd in t.partition_data]
                                           for t in req.topic_data}))
        txn_id = req.transactional_id if version >= 3 else None
        op = _Request(acks, {})
        for t in req.topic_data:
            out = op.results.setdefault(t.name, [])
            for pd in t.partition_data:
                p = self.core.partitions.get(TopicPartition(t.name, pd.index))
                got = self._partition(p, pd.index, pd.records, acks, txn_id)
                if isinstance(got, _Unverified):
                    op.unverified[got.p.tp] = got
                    out.append(result(pd.index, Err.NOT_ENOUGH_REPLICAS))  # until the coordinator answers
                else:
                    out.append(got[0])
                    if got[1] is not None and p is not None:
                        op.waits.append((p, got[1]))
        if op.unverified:
            assert txn_id is not None
            self._ask(op, txn_id)
        if acks == 0:
            return Reply(version, None)
        early = getattr(self.core.replication, "produce_complete_early", None)
        early_ack = early is not None and early()
        if not op.unverified and (acks == 1 or not op.waits or early_ack):
            op.finished = True
            return Reply(version, body_of(op.results))
        deadline = self.core.clock.monotonic_ms() + max(0, req.timeout_ms)

        def ready() -> bool:
            if op.unverified:
                return False
            return acks == 1 or early_ack or all(p.hw >= off or not p.is_leader() for p, off in op.waits)

        def complete(timed_out: bool) -> Body:
            op.finished = True  # a verification answered from now on appends nothing
            if acks == 1 or early_ack:  # answered as written (acks=1 waited only for verification)
                if early_ack and any(not p.is_leader() for p, _ in op.waits):
                    _LEADERSHIP_MOVED()
                return body_of(op.results)
            for p, off in op.waits:
                for r in op.results[p.tp.topic]:
                    if r["index"] == p.tp.partition and r["error_code"] == 0:
                        if not p.is_leader():
                            _LEADERSHIP_MOVED()
                            r["error_code"] = int(Err.NOT_LEADER_OR_FOLLOWER)
                        elif p.hw < off:
                            _TIMED_OUT()
                            r["error_code"] = int(Err.REQUEST_TIMED_OUT)
                        elif self.core.replication.accepts_produce(p) != Err.NONE:  # the ISR shrank below
                            _AFTER_APPEND()
                            r["error_code"] = int(Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND)  # min.insync meanwhile
            return body_of(op.results)

        keys = frozenset([p.tp for p, _ in op.waits] + list(op.unverified))
        return Reply(version, deferred=self.core.purgatory.add(Deferred(ready, complete, deadline, version, keys)))

    def _ask(self, op: _Request, txn_id: str) -> None:
        by_producer: dict[tuple[int, int], list[TopicPartition]] = {}
        for tp, u in op.unverified.items():
            by_producer.setdefault((u.header.producer_id, u.header.producer_epoch), []).append(tp)
        for (pid, epoch), tps in by_producer.items():
            def done(errors: dict[TopicPartition, Err], tps: list[TopicPartition] = tps) -> None:
                self._verified(op, tps, errors)

            self.verifier.verify(txn_id, pid, epoch, tps, done)

    def _verified(self, op: _Request, tps: list[TopicPartition], errors: dict[TopicPartition, Err]) -> None:
        """The coordinator answered for `tps`: append those it confirmed (unless the request is over)."""
        if op.finished:
            log.info("verification of %s answered after its produce request ended; nothing appended", tps)
            return
        for tp in tps:
            u = op.unverified.get(tp)
            if u is None:
                continue
            err = errors.get(tp, Err.UNKNOWN_SERVER_ERROR)
            if err != Err.NONE:
                if err == Err.INVALID_TXN_STATE:
                    _NOT_IN_TXN()
                log.info("%s: transactional produce of producer %d epoch %d not verified: %s", tp,
                         u.header.producer_id, u.header.producer_epoch, err.name)
                op.set(tp, result(u.index, err, message="Partition was not added to the transaction"
                                  if err == Err.INVALID_TXN_STATE else None))
            else:
                # still unverified while it appends: the append's own purgatory check must not find the
                # request ready before its wait for the HW is registered (it answered acks=all early)
                res, wait = self._checked_append(u.p, u.index, bytes(u.records), [u.header], op.acks, token=u.token)
                op.set(tp, res)
                if wait is not None:
                    op.waits.append((u.p, wait))
            del op.unverified[tp]
        self.core.purgatory.check(tps)

    def _partition(self, p: Partition | None, index: int, records: bytes | None, acks: int,
                   txn_id: str | None) -> tuple[Result, int | None] | _Unverified:
        if p is None:
            return result(index, Err.UNKNOWN_TOPIC_OR_PARTITION), None
        if not p.is_leader():
            return result(index, Err.NOT_LEADER_OR_FOLLOWER), None
        if not records:
            return result(index, Err.CORRUPT_MESSAGE), None
        if len(records) > self.core.topic_settings(p.tp.topic).max_message_bytes:
            return result(index, Err.MESSAGE_TOO_LARGE), None
        try:
            headers = validate(records)
        except Refused as e:
            log.warning("%s: refusing produce: %s", p.tp, e)
            return result(index, e.error, message=e.message), None
        if txn_id is None and any(h.is_transactional for h in headers):
            return result(index, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                          message="transactional records need the producer's transactional id"), None
        if len(headers) == 1:
            h = headers[0]
            opens = (h.is_transactional and txn_id is not None
                     and not p.producers.has_ongoing(h.producer_id, h.producer_epoch)
                     and p.producers.check(h).duplicate_of is None)
            if opens:
                _OPENS_TXN()
            if self.verify and opens:
                return _Unverified(p, index, records, h, p.producers.begin_verification(h.producer_id,
                                                                                        h.producer_epoch))
        return self._checked_append(p, index, records, headers, acks, token=None)

    def _checked_append(self, p: Partition, index: int, records: bytes, headers: list[BatchHeader], acks: int, *,
                        token: int | None) -> tuple[Result, int | None]:
        if not p.is_leader():
            return result(index, Err.NOT_LEADER_OR_FOLLOWER), None
        if acks == -1:
            err = self.core.replication.accepts_produce(p)
            if err != Err.NONE:
                _NOT_ENOUGH()
                return result(index, err), None
        if len(headers) == 1:
            h = headers[0]
            check = p.producers.check(h)
            if check.error != Err.NONE:
                if check.error == Err.OUT_OF_ORDER_SEQUENCE_NUMBER:
                    _OUT_OF_ORDER()
                elif check.error == Err.INVALID_PRODUCER_EPOCH:
                    _STALE_PRODUCER()
                return result(index, check.error, message=check.message), None
            if check.duplicate_of is not None:
                _DUPLICATE()
                base, last = check.duplicate_of
                return result(index, Err.NONE, base, p.log.log_start_offset), last + 1
            if (token is not None and not p.producers.has_ongoing(h.producer_id, h.producer_epoch)
                    and not p.producers.verified(h.producer_id, h.producer_epoch, token)):
                return result(index, Err.INVALID_TXN_STATE, message="the transaction ended while the partition "
                              "was being verified"), None
        elif any(h.producer_id >= 0 for h in headers):
            return result(index, Err.INVALID_REQUEST), None
        info = p.append_as_leader(records)
        self.core.replication.on_leader_append(p)
        self.core.purgatory.check([p.tp])
        return result(index, Err.NONE, info.base_offset, p.log.log_start_offset), info.last_offset + 1
