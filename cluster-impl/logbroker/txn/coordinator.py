"""The transaction coordinator: the transaction APIs, `__transaction_state` loading, writes, timeouts.

This broker coordinates the transactional ids whose partition of `__transaction_state` it leads,
followed on every request and tick by the rules the group coordinator uses
(`core/coordinator_partitions.py`): a partition newly led here is read from its log (the last
record of each id wins), and every transaction found in PrepareCommit/PrepareAbort is resumed — its
markers are sent again to every partition, then CompleteCommit/CompleteAbort is written; a
partition no longer led here is dropped, its pending answers become NOT_COORDINATOR.

Every state change is written to the partition and adopted only once its HW covers the record
(acks=all); the client's answer waits for that. EndTxn is answered once PrepareCommit/PrepareAbort
is written — the decision is then durable — and the marker sender (`markers.py`) finishes the
transaction. A transaction open longer than its timeout is aborted by the coordinator, with the
producer's epoch bumped so its late writes are fenced (`state.fence_and_abort`), checked every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`.

APIs: InitProducerId (22; without a transactional id it hands out an idempotent producer id),
AddPartitionsToTxn (24; v0-3 from clients, v4 the brokers' batch form, whose `verify_only` answers a
partition leader's KIP-890 question), AddOffsetsToTxn (25), EndTxn (26; v5 bumps the epoch, KIP-890
part 2, when `transaction.kip890.enable`), DescribeTransactions (65), ListTransactions (66), and
FindCoordinator's key type 1 (through the group coordinator's FindCoordinator).

Timestamps in records (a transaction's start, its last update) are the wall clock, as Kafka's, so a
new coordinator on another broker times out a transaction it loaded from when it really began.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka.record.default_records import DefaultRecordBatch

from logbroker.bugs import Bug
from logbroker.core.coordinator_partitions import (
    NO_NODE,
    Found,
    Loaded,
    append_and_wait,
    coordinator_node,
    follow,
)
from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.producer_id import ProducerIdsUnavailable
from logbroker.core.purgatory import Body, Deferred
from logbroker.core.reply import Reply
from logbroker.group.records import OFFSETS_TOPIC
from logbroker.probes import probe
from logbroker.protocol.errors import Err
from logbroker.txn import records
from logbroker.txn.host import TxnHost
from logbroker.txn.markers import MarkerJob, MarkerSender
from logbroker.txn.records import TXN_TOPIC
from logbroker.txn.state import (
    Entry,
    TxnMeta,
    TxnState,
    add_partitions,
    complete,
    end_txn,
    fence_and_abort,
    init_producer,
    new_producer,
    timed_out,
    verify_partitions,
)

log = logging.getLogger(__name__)
_LOADS_PREPARED = probe("txn-coordinator-loads-prepared")
_UNLOAD_PENDING = probe("txn-coordinator-unloads-with-markers-pending")
_TIMED_OUT = probe("txn-timed-out-aborted")
_CONCURRENT = probe("txn-concurrent-transactions")
_NO_PRODUCER_ID = probe("producer-id-block-not-ready")

WRITE_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms bounds a coordinator's log appends


def _once(f: Callable[[Err, int], Body]) -> Callable[[Err, int], Body]:
    """A write's completion runs once: the server asks an already finished Deferred for its body again."""
    memo: list[Body] = []

    def run(err: Err, base: int) -> Body:
        if not memo:
            memo.append(f(err, base))
        return memo[0]

    return run


def _fenced(err: Err, version: int, since: int) -> Err:
    """Clients of an API version before PRODUCER_FENCED learn INVALID_PRODUCER_EPOCH (KafkaApis)."""
    return Err.INVALID_PRODUCER_EPOCH if err == Err.PRODUCER_FENCED and version < since else err


class TxnCoordinator:
    def __init__(self, core: TxnHost) -> None:
        self.core = core
        self.cfg = core.config
        self.entries: dict[str, Entry] = {}
        self.loaded: dict[int, Loaded] = {}  # partition of __transaction_state → its load
        self.markers = MarkerSender(core, self._markers_written)
        self._completing: dict[str, TxnMeta] = {}  # markers all written, CompleteX not yet (retried)
        self._next_timeout_scan = 0

    def handlers(self) -> dict[int, Callable[[int, Any], Reply]]:
        return {22: self.init_producer_id, 24: self.add_partitions_to_txn, 25: self.add_offsets_to_txn,
                26: self.end_txn, 65: self.describe_transactions, 66: self.list_transactions}

    def _now(self) -> int:
        return self.core.clock.now_ms()

    # --- ownership ---------------------------------------------------------------------------------
    def _num_partitions(self) -> int:
        return len(self.core.metadata.topics.get(TXN_TOPIC, {})) or self.cfg.transaction_state_log_num_partitions

    def _partition_of(self, transactional_id: str) -> int:
        return records.partition_for(transactional_id, self._num_partitions())

    def _owned(self, pidx: int) -> Partition | None:
        return follow(self.core.partitions.get(TopicPartition(TXN_TOPIC, pidx)), self.loaded, pidx, self._unload,
                      self._load)

    def _coordinator_error(self, transactional_id: str | None) -> Err:
        if not transactional_id:
            return Err.INVALID_REQUEST
        return Err.NONE if self._owned(self._partition_of(transactional_id)) is not None else Err.NOT_COORDINATOR

    def _entry(self, transactional_id: str, missing: Err = Err.INVALID_PRODUCER_ID_MAPPING) -> tuple[Err, Entry | None]:
        """The id's state if this broker coordinates it; else the error to answer (`missing` for an
        id it coordinates but does not know)."""
        err = self._coordinator_error(transactional_id)
        e = self.entries.get(transactional_id) if err == Err.NONE else None
        return (missing if err == Err.NONE and e is None else err), e

    def _load(self, p: Partition) -> None:
        found: dict[str, TxnMeta] = {}
        for _, raw in p.log.batches():
            for rec in DefaultRecordBatch(bytes(raw)):
                m = records.decode(rec.key, rec.value)
                if m is not None:
                    found[m.transactional_id] = m
        load = self.loaded[p.tp.partition] = Loaded(p.leader_epoch)
        resumed = 0
        for tid, m in found.items():
            self.entries[tid] = Entry(m)
            if m.state.preparing:
                _LOADS_PREPARED()
                if Bug.FORGET_PREPARED_TXNS in self.cfg.bugs:
                    log.warning("%s: %s left in %s (forget-prepared-txns)", p.tp, tid, m.state.value)
                    continue
                self.markers.add(m, load.epoch)
                resumed += 1
        log.info("%s: loaded %d transactional ids as leader at epoch %d, resumed %d decided transactions", p.tp,
                 len(found), p.leader_epoch, resumed)

    def _unload(self, pidx: int) -> None:
        self.loaded.pop(pidx, None)
        n = self._num_partitions()
        gone = [t for t in self.entries if records.partition_for(t, n) == pidx]
        for tid in gone:
            if self.markers.pending(tid):
                _UNLOAD_PENDING()
            del self.entries[tid]
            self.markers.drop(tid)
            self._completing.pop(tid, None)
        log.info("%s-%d: unloaded %d transactional ids", TXN_TOPIC, pidx, len(gone))

    def tick(self) -> None:
        """Timers: load partitions newly led here and unload those led elsewhere (eagerly, unlike the
        group coordinator: a decided transaction must be finished, and an open one timed out, even if
        its producer never comes back), send markers, abort timed-out transactions."""
        for pidx in sorted(set(self.loaded) | set(self.core.metadata.topics.get(TXN_TOPIC, {}))):
            if pidx in self.loaded or TopicPartition(TXN_TOPIC, pidx) in self.core.partitions:
                self._owned(pidx)
        self.markers.tick()
        for tid, m in list(self._completing.items()):
            self._write_complete(tid, m)
        now = self._now()
        if now < self._next_timeout_scan:
            return
        self._next_timeout_scan = now + self.cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
        for tid, e in list(self.entries.items()):
            if timed_out(e.meta, now) and not e.busy:
                _TIMED_OUT()
                log.info("%s: transaction of producer %d open for %d ms (timeout %d): aborting it", tid,
                         e.meta.producer_id, now - e.meta.start_ms, e.meta.timeout_ms)
                self._fence_and_abort(e, 0, lambda _err: {})

    # --- writes --------------------------------------------------------------------------------------
    def _write(self, e: Entry, new: TxnMeta, version: int, then: Callable[[Err], Body],
               adopted: Callable[[], None] = lambda: None) -> Deferred:
        """Write `new`; once it is replicated adopt it (`adopted` runs after), then answer `then(err)`.
        While it is in flight the id is busy (CONCURRENT_TRANSACTIONS)."""
        pidx = self._partition_of(new.transactional_id)
        p = self._owned(pidx)
        if p is None:
            body = then(Err.NOT_COORDINATOR)
            return Deferred(lambda: True, lambda _t: body, 0, version, done=True)
        load = self.loaded[pidx]
        e.pending = True

        def done(err: Err, _base: int) -> Body:
            current = self.entries.get(new.transactional_id) is e and self.loaded.get(pidx) is load
            if current:
                e.pending = False
                if err == Err.NONE:
                    e.meta = new
                    adopted()
            elif err == Err.NONE:
                err = Err.NOT_COORDINATOR  # written, but this load is gone: the new one has it
            return then(err)

        return append_and_wait(self.core, p, [records.txn_record(new)], version, WRITE_TIMEOUT_MS, _once(done))

    def _decided(self, e: Entry) -> None:
        """PrepareCommit/PrepareAbort is written: send the markers."""
        load = self.loaded.get(self._partition_of(e.meta.transactional_id))
        if load is not None:
            self.markers.add(e.meta, load.epoch)

    def _markers_written(self, job: MarkerJob) -> None:
        self._write_complete(job.meta.transactional_id, job.meta)

    def _write_complete(self, tid: str, prepared: TxnMeta) -> None:
        e = self.entries.get(tid)
        if e is None or e.meta != prepared:
            self._completing.pop(tid, None)
            return
        if e.pending:
            self._completing[tid] = prepared  # try again at the next tick
            return
        self._completing.pop(tid, None)

        def then(err: Err) -> Body:
            if err == Err.COORDINATOR_NOT_AVAILABLE and self.entries.get(tid) is e:
                self._completing[tid] = prepared  # the ISR was short: retried on a later tick
            return {}

        self._write(e, complete(prepared, self._now()), 0, then)

    def _fence_and_abort(self, e: Entry, version: int, then: Callable[[Err], Body]) -> Deferred:
        """Abort the open transaction with the epoch bumped (its producer is fenced)."""
        def answered(err: Err) -> Body:
            if err != Err.NONE and self.entries.get(e.meta.transactional_id) is e:
                e.fence_failed = True  # the bump may not be in the log: do not bump twice
            elif err == Err.NONE:
                e.fence_failed = False
            return then(err)

        return self._write(e, fence_and_abort(e, self._now()), version, answered, lambda: self._decided(e))

    # --- FindCoordinator (key type 1, through the group coordinator) ---------------------------------
    def coordinator_for(self, key: str) -> Found:
        if not key:
            return Err.INVALID_REQUEST, "empty transactional id", NO_NODE
        return coordinator_node(self.core.metadata, self.core.partitions, TXN_TOPIC,
                                lambda n: records.partition_for(key, n),
                                self._create_topic)

    def _create_topic(self) -> None:
        rf = 1 if self.cfg.standalone else self.cfg.transaction_state_log_replication_factor
        if rf > len(self.core.metadata.brokers):
            log.warning("%s needs %d live brokers, %d are", TXN_TOPIC, rf, len(self.core.metadata.brokers))
            return
        configs = {"min.insync.replicas": str(min(self.cfg.transaction_state_log_min_isr, rf))}
        err = self.core.replication.create_topic(TXN_TOPIC, self.cfg.transaction_state_log_num_partitions, rf,
                                                 configs)
        if err not in (Err.NONE, Err.TOPIC_ALREADY_EXISTS):
            log.warning("cannot create %s: %s", TXN_TOPIC, err.name)

    # --- InitProducerId ------------------------------------------------------------------------------
    def init_producer_id(self, version: int, req: Any) -> Reply:
        tid = req.transactional_id

        def body(err: Err, pid: int = -1, epoch: int = -1) -> Body:
            return {"throttle_time_ms": 0, "error_code": int(_fenced(err, version, 4)), "producer_id": pid,
                    "producer_epoch": epoch}

        if tid is None:  # an idempotent producer
            try:
                return Reply(version, body(Err.NONE, self.core.producer_ids.next(), 0))
            except ProducerIdsUnavailable:
                return self._no_producer_id(version, body)
        timeout = req.transaction_timeout_ms
        err = self._coordinator_error(tid)
        if err == Err.NONE and not 0 < timeout <= self.cfg.transaction_max_timeout_ms:
            err = Err.INVALID_TRANSACTION_TIMEOUT
        if err != Err.NONE:
            return Reply(version, body(err))
        now = self._now()
        try:  # both take a new producer id only when they need one (a new id, an exhausted epoch)
            e = self.entries.get(tid)
            if e is None:
                e = self.entries[tid] = Entry(new_producer(tid, self.core.producer_ids.next(), timeout, now))
            expected = (req.producer_id, req.producer_epoch) if version >= 3 and req.producer_id >= 0 else None
            out = init_producer(e, timeout, expected, now, self.core.producer_ids.next)
        except ProducerIdsUnavailable:
            return self._no_producer_id(version, body)
        if out == "fence":  # abort the open transaction first; the client asks again
            _CONCURRENT()
            return Reply(version, deferred=self._fence_and_abort(
                e, version, lambda err: body(err if err != Err.NONE else Err.CONCURRENT_TRANSACTIONS)))
        if isinstance(out, Err):
            return Reply(version, body(out))
        assert isinstance(out, TxnMeta)
        new = out
        log.info("%s: producer %d epoch %d (InitProducerId)", tid, new.producer_id, new.producer_epoch)
        return Reply(version, deferred=self._write(
            e, new, version, lambda err: body(err, new.producer_id, new.producer_epoch) if err == Err.NONE
            else body(err)))

    @staticmethod
    def _no_producer_id(version: int, body: Callable[[Err], Body]) -> Reply:
        """No producer id at hand (the broker's block from the store is still being claimed):
        COORDINATOR_LOAD_IN_PROGRESS, as Kafka's producer-id manager answers then, which every
        client retries (kafka-python re-enqueues any retriable error, librdkafka asks again)."""
        _NO_PRODUCER_ID()
        return Reply(version, body(Err.COORDINATOR_LOAD_IN_PROGRESS))

    # --- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------------
    def add_partitions_to_txn(self, version: int, req: Any) -> Reply:
        if version >= 4:
            return self._add_partitions_batch(version, req)
        tid, pid, epoch = req.v3_and_below_transactional_id, req.v3_and_below_producer_id, \
            req.v3_and_below_producer_epoch
        asked = [TopicPartition(t.name, i) for t in req.v3_and_below_topics for i in t.partitions]

        def body(errors: dict[TopicPartition, Err]) -> Body:
            by_topic: dict[str, list[dict[str, int]]] = {}
            for tp in asked:
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "partition_error_code": int(_fenced(errors[tp], version, 2))})
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
                {"name": t, "results_by_partition": rs} for t, rs in by_topic.items()]}

        unknown = {tp for tp in asked if tp.partition not in self.core.metadata.topics.get(tp.topic, {})}
        if unknown:  # as KafkaApis: the unknown ones say so, the rest were not attempted
            return Reply(version, body({tp: Err.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                                        else Err.OPERATION_NOT_ATTEMPTED for tp in asked}))
        return self._add(version, tid, pid, epoch, frozenset(asked),
                         lambda err: body(dict.fromkeys(asked, err)))

    def _add(self, version: int, tid: str, pid: int, epoch: int, tps: frozenset[TopicPartition],
             then: Callable[[Err], Body]) -> Reply:
        err, e = self._entry(tid)
        if e is None:
            return Reply(version, then(err))
        out = add_partitions(e, pid, epoch, tps, self._now())
        if isinstance(out, Err):
            return Reply(version, then(out))
        return Reply(version, deferred=self._write(e, out, version, then))

    def _add_partitions_batch(self, version: int, req: Any) -> Reply:
        """v4: the brokers' form, one entry per transaction; `verify_only` asks without adding."""
        results: list[tuple[str, dict[TopicPartition, Err]]] = []
        waits: list[Deferred] = []
        for txn in req.transactions:
            tps = [TopicPartition(t.name, i) for t in txn.topics for i in t.partitions]
            errors: dict[TopicPartition, Err] = {}
            results.append((txn.transactional_id, errors))
            if txn.verify_only:
                errors.update(self._verify(txn.transactional_id, txn.producer_id, txn.producer_epoch, tps))
                continue

            def then(err: Err, errors: dict[TopicPartition, Err] = errors, tps: list[TopicPartition] = tps) -> Body:
                errors.update(dict.fromkeys(tps, err))
                return {}

            r = self._add(version, txn.transactional_id, txn.producer_id, txn.producer_epoch, frozenset(tps), then)
            if r.deferred is not None:
                waits.append(r.deferred)

        def body(_timed_out: bool = False) -> Body:
            return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
                {"transactional_id": tid, "topic_results": [
                    {"name": t, "results_by_partition": [{"partition_index": tp.partition,
                                                          "partition_error_code": int(err)}
                                                         for tp, err in errs.items() if tp.topic == t]}
                    for t in dict.fromkeys(tp.topic for tp in errs)]} for tid, errs in results]}

        if not waits:
            return Reply(version, body())
        keys = frozenset().union(*(d.keys for d in waits))
        return Reply(version, deferred=self.core.purgatory.add(Deferred(
            lambda: all(d.done for d in waits), body, self.core.clock.monotonic_ms() + WRITE_TIMEOUT_MS + 1000,
            version, keys)))

    def _verify(self, tid: str, pid: int, epoch: int, tps: list[TopicPartition]) -> dict[TopicPartition, Err]:
        err, e = self._entry(tid)
        if e is None:
            return dict.fromkeys(tps, err)
        got = verify_partitions(e, pid, epoch, tps)
        return dict.fromkeys(tps, got) if isinstance(got, Err) else got

    def add_offsets_to_txn(self, version: int, req: Any) -> Reply:
        """The group's `__consumer_offsets` partition joins the transaction (its TxnOffsetCommit goes
        there, and its marker makes the offsets visible)."""
        n = len(self.core.metadata.topics.get(OFFSETS_TOPIC, {})) or self.cfg.offsets_topic_num_partitions
        tp = TopicPartition(OFFSETS_TOPIC, records.partition_for(req.group_id, n))

        def then(err: Err) -> Body:
            return {"throttle_time_ms": 0, "error_code": int(_fenced(err, version, 2))}

        return self._add(version, req.transactional_id, req.producer_id, req.producer_epoch, frozenset({tp}), then)

    # --- EndTxn ----------------------------------------------------------------------------------------
    def end_txn(self, version: int, req: Any) -> Reply:
        tid = req.transactional_id

        def body(err: Err, pid: int = -1, epoch: int = -1) -> Body:
            out: Body = {"throttle_time_ms": 0, "error_code": int(_fenced(err, version, 2))}
            if version >= 5:
                out |= {"producer_id": pid, "producer_epoch": epoch}
            return out

        err, e = self._entry(tid)
        if e is None:
            return Reply(version, body(err))
        tv2 = version >= 5 and self.cfg.transaction_kip890_enable
        out = end_txn(e, req.producer_id, req.producer_epoch, bool(req.committed), tv2, self._now())
        if out == Err.NONE:  # a retry of an end that was written
            return Reply(version, body(Err.NONE, e.meta.producer_id, e.meta.producer_epoch))
        if isinstance(out, Err):
            return Reply(version, body(out))
        new = out
        log.info("%s: %s producer %d epoch %d, %d partitions", tid, new.state.value, new.producer_id,
                 new.producer_epoch, len(new.partitions))
        return Reply(version, deferred=self._write(
            e, new, version, lambda err: body(err, new.producer_id, new.producer_epoch) if err == Err.NONE
            else body(err), lambda: self._decided(e)))

    # --- DescribeTransactions, ListTransactions --------------------------------------------------------
    def describe_transactions(self, version: int, req: Any) -> Reply:
        out = []
        for tid in req.transactional_ids:
            err, e = self._entry(tid, Err.TRANSACTIONAL_ID_NOT_FOUND)
            d: dict[str, Any] = {"error_code": int(err), "transactional_id": tid, "transaction_state": "",
                                 "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                                 "producer_epoch": -1, "topics": []}
            if e is not None:
                m = e.meta
                parts = self.markers.pending(tid) if m.state.preparing else set(m.partitions)
                by_topic: dict[str, list[int]] = {}
                for tp in sorted(parts, key=lambda tp: (tp.topic, tp.partition)):
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                d.update(transaction_state=m.state.value, transaction_timeout_ms=m.timeout_ms,
                         transaction_start_time_ms=m.start_ms, producer_id=m.producer_id,
                         producer_epoch=m.producer_epoch,
                         topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
            out.append(d)
        return Reply(version, {"throttle_time_ms": 0, "transaction_states": out})

    def list_transactions(self, version: int, req: Any) -> Reply:
        for pidx in list(self.loaded):
            self._owned(pidx)
        known = {s.value for s in TxnState}
        states = set(req.state_filters or [])
        pids = set(req.producer_id_filters or [])
        longer = req.duration_filter if version >= 1 else -1
        now = self._now()
        listed = [{"transactional_id": tid, "producer_id": e.meta.producer_id, "transaction_state": e.meta.state.value}
                  for tid, e in sorted(self.entries.items())
                  if (not states or e.meta.state.value in states) and (not pids or e.meta.producer_id in pids)
                  and (longer < 0 or (e.meta.start_ms >= 0 and now - e.meta.start_ms >= longer))]
        return Reply(version, {"throttle_time_ms": 0, "error_code": 0,
                               "unknown_state_filters": sorted(states - known), "transaction_states": listed})
