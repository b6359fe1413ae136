"""The marker sender: WriteTxnMarkers to every partition of a decided transaction, until all answer.

Once PrepareCommit/PrepareAbort is written to `__transaction_state`, the decision is made and only
the markers remain (Kafka's TransactionMarkerChannelManager). For each transaction the sender keeps
the partitions still without a marker and, on every tick, sends each partition's leader (from the
metadata cache, so it follows leader moves) one WriteTxnMarkers request for its partitions. A
partition is done when its leader answers NONE — which a leader does only once the marker is
replicated to its ISR (TXN-CONTRACT item 1). Any other answer is retried after a backoff with fresh
metadata: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, no answer at all, an
unknown partition while the topic still exists. Kafka's exceptions:

- a partition whose topic is gone from the metadata needs no marker (the topic was deleted) — but
  only once this broker has a whole view (`MetadataCache.complete`): a coordinator that restarts
  can load `__transaction_state` before its first UpdateMetadata, and took every topic for deleted,
  completing an abort without its markers and leaving the partitions' LSO stuck for good (sim seed
  300051: power loss of the coordinator's node, the transaction in PrepareAbort). Kafka's
  controller sends UpdateMetadata before LeaderAndIsr to a broker that starts, so its cache is
  never empty there;
- INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED: a newer coordinator or producer epoch
  took over the producer at that partition, so this coordinator stops sending for the transaction
  (the new coordinator, which loaded PrepareX from the log, finishes it).

When no partition is left, `on_done(job)` writes CompleteCommit/CompleteAbort. Markers for a
partition this broker leads are handed to its own WriteTxnMarkers handler in-process; others go
through the replication layer's `ask_broker` (real sockets, or the simulator's network). A job
belongs to one load of its `__transaction_state` partition: the coordinator drops it on unload, and
answers to a dropped job are ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from logbroker.core.partition import TopicPartition
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from logbroker.txn.host import TxnHost
from logbroker.txn.state import TxnMeta

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS, MARKERS_VERSION = 27, 2
RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms
_GIVE_UP = frozenset({Err.INVALID_PRODUCER_EPOCH, Err.TRANSACTION_COORDINATOR_FENCED})


@dataclass
class MarkerJob:
    """The markers one decided transaction still needs."""

    meta: TxnMeta  # in PrepareCommit or PrepareAbort: producer id and epoch, the decision
    coordinator_epoch: int
    remaining: set[TopicPartition] = field(default_factory=set)
    in_flight: set[TopicPartition] = field(default_factory=set)
    retry_at_ms: int = 0
    abandoned: bool = False  # fenced: another coordinator finishes it

    @property
    def done(self) -> bool:
        return not self.remaining and not self.in_flight


class MarkerSender:
    def __init__(self, core: TxnHost, on_done: Callable[[MarkerJob], None]) -> None:
        self.core = core
        self.on_done = on_done
        self.jobs: dict[str, MarkerJob] = {}

    def add(self, meta: TxnMeta, coordinator_epoch: int) -> MarkerJob:
        job = MarkerJob(meta, coordinator_epoch, set(meta.partitions))
        self.jobs[meta.transactional_id] = job
        self._send(job)
        return job

    def drop(self, transactional_id: str) -> None:
        self.jobs.pop(transactional_id, None)

    def tick(self) -> None:
        now = self.core.clock.monotonic_ms()
        for job in list(self.jobs.values()):
            if job.remaining and now >= job.retry_at_ms:
                self._send(job)

    def pending(self, transactional_id: str) -> set[TopicPartition]:
        """The partitions still without their marker (DescribeTransactions shows them)."""
        job = self.jobs.get(transactional_id)
        return (job.remaining | job.in_flight) if job is not None else set()

    # --- sending -------------------------------------------------------------------------------------
    def _send(self, job: MarkerJob) -> None:
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(job.remaining, key=lambda tp: (tp.topic, tp.partition)):
            parts = self.core.metadata.topics.get(tp.topic)
            if parts is None or tp.partition not in parts:
                if not self.core.metadata.complete:
                    continue  # this broker has no view of the cluster yet: asked again after the backoff
                log.info("%s: no marker for %s, whose topic is gone", job.meta.transactional_id, tp)
                job.remaining.discard(tp)
                continue
            leader = parts[tp.partition].leader
            if leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            self._maybe_finished(job)
            if job.remaining:
                job.retry_at_ms = self.core.clock.monotonic_ms() + RETRY_BACKOFF_MS
            return
        for leader, tps in by_leader.items():
            job.remaining.difference_update(tps)
            job.in_flight.update(tps)
            self._request(job, leader, tps)

    def _body(self, job: MarkerJob, tps: list[TopicPartition]) -> dict[str, Any]:
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        m = job.meta
        return {"markers": [{"producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
                             "transaction_result": m.commit, "coordinator_epoch": job.coordinator_epoch,
                             "transaction_version": 2 if m.tv2 else 0,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]}

    def _request(self, job: MarkerJob, leader: int, tps: list[TopicPartition]) -> None:
        body = self._body(job, tps)

        def answer(resp: Any) -> None:
            self._answered(job, tps, resp)

        if leader != self.core.config.broker_id:
            self.core.replication.ask_broker(leader, WriteTxnMarkersRequest, WriteTxnMarkersResponse, MARKERS_VERSION,
                                             body, answer)
            return
        reply = self.core.handlers[WRITE_TXN_MARKERS](MARKERS_VERSION,
                                                      make_message(WriteTxnMarkersRequest, MARKERS_VERSION, body))

        def local(version: int, b: dict[str, Any] | None) -> None:
            answer(None if b is None else make_message(WriteTxnMarkersResponse, version, b))

        if reply.deferred is None:
            local(reply.version, reply.body)
        elif reply.deferred.done:  # answered before we could listen: its body is built again (as server.py does)
            local(reply.deferred.version, reply.deferred.complete(False))
        else:
            reply.deferred.on_done(local)

    def _answered(self, job: MarkerJob, tps: list[TopicPartition], resp: Any) -> None:
        if self.jobs.get(job.meta.transactional_id) is not job or job.abandoned:
            return  # unloaded, replaced, or fenced meanwhile
        errors: dict[TopicPartition, Err] = dict.fromkeys(tps, Err.NETWORK_EXCEPTION)
        if resp is not None:
            for mk in resp.markers:
                for t in mk.topics:
                    for r in t.partitions:
                        tp = TopicPartition(t.name, r.partition_index)
                        if tp in errors:
                            errors[tp] = _err(r.error_code)
        retry = False
        for tp, err in errors.items():
            job.in_flight.discard(tp)
            if err == Err.NONE:
                continue
            if err in _GIVE_UP:
                log.warning("%s: marker at %s refused (%s): another coordinator or epoch took over; stopping",
                            job.meta.transactional_id, tp, err.name)
                job.abandoned = True
                self.jobs.pop(job.meta.transactional_id, None)
                return
            job.remaining.add(tp)
            retry = True
        if retry:
            job.retry_at_ms = self.core.clock.monotonic_ms() + RETRY_BACKOFF_MS
        self._maybe_finished(job)

    def _maybe_finished(self, job: MarkerJob) -> None:
        if job.done and self.jobs.get(job.meta.transactional_id) is job:
            del self.jobs[job.meta.transactional_id]
            self.on_done(job)


def _err(code: int) -> Err:
    try:
        return Err(code)
    except ValueError:
        return Err.UNKNOWN_SERVER_ERROR
