"""WriteTxnMarkers (API 27), the partition leader's side: end a transaction in each of its partitions.

The transaction coordinator, once it has decided (PrepareCommit/PrepareAbort written to
`__transaction_state`), sends each leader of the transaction's partitions one request listing the
markers (producer id and epoch, COMMIT or ABORT, its coordinator epoch, the partitions). The leader
appends a control batch per partition (`log/control.py`) and answers each partition only once the
marker is replicated to the ISR, with acks=all semantics: the coordinator forgets the transaction
when every partition has answered, so a marker it was told about must survive any leader change.
Errors per partition, as Kafka: UNKNOWN_TOPIC_OR_PARTITION (no such partition), NOT_LEADER_OR_FOLLOWER
(not led here, or leadership moved before the marker was replicated), NOT_ENOUGH_REPLICAS (the ISR is
below min.insync.replicas), INVALID_PRODUCER_EPOCH (older than the producer's epoch here),
TRANSACTION_COORDINATOR_FENCED (the producer's last marker came from a newer coordinator),
REQUEST_TIMED_OUT (not replicated in time). Nothing is appended for a refused partition.

KIP-890 part 2 (epoch bump at every end): the coordinator writes the markers with the bumped epoch;
the partition takes the marker's epoch as the producer's, so later data with the old epoch is fenced.
A v2 request says its transaction version; a TV2 marker must exceed the producer's epoch here, as
Kafka checks (`ProducerStateTable.check_marker`).

The bug switch `marker-ack-before-replication` answers once the leader has written the marker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from logbroker.core.coordinator_partitions import append_survives
from logbroker.core.leader_host import LeaderHost
from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.purgatory import Body, Deferred
from logbroker.core.reply import Reply
from logbroker.log.control import ControlMarker, marker_batch
from logbroker.probes import probe
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)
_MARKER_LOST = probe("txn-marker-leader-lost")
_MARKER_REFUSED = probe("txn-marker-refused")

MARKER_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms, which bounds its marker appends


@dataclass
class _Written:
    """One appended marker waiting for the ISR."""

    p: Partition
    epoch: int  # the leader epoch it was written at
    offset: int
    producer_id: int
    producer_epoch: int
    commit: bool

    def lost(self) -> bool:
        """Leadership moved and the marker is gone from the log. A same-leader epoch bump (the ISR
        changed, the leader stayed) keeps it: answering NOT_LEADER there only made the coordinator
        write a duplicate marker."""
        return not append_survives(self.p, self.epoch, self.offset + 1)

    def replicated(self) -> bool:
        return self.p.hw > self.offset


class TxnMarkerWriter:
    def __init__(self, core: LeaderHost, *, ack_before_replication: bool = False) -> None:
        self.core = core
        self.ack_before_replication = ack_before_replication

    def write_txn_markers(self, version: int, req: Any) -> Reply:
        results: list[tuple[int, dict[str, dict[int, Err]]]] = []
        waits: list[tuple[dict[int, Err], int, _Written]] = []
        for m in req.markers:
            strict = version >= 2 and (getattr(m, "transaction_version", 0) or 0) >= 2
            marker = ControlMarker(bool(m.transaction_result), m.coordinator_epoch)
            by_topic: dict[str, dict[int, Err]] = {}
            for t in m.topics:
                errs = by_topic.setdefault(t.name, {})
                for i in t.partition_indexes:
                    err, w = self._write(TopicPartition(t.name, i), m.producer_id, m.producer_epoch, marker, strict)
                    errs[i] = err
                    if w is not None:
                        waits.append((errs, i, w))
            results.append((m.producer_id, by_topic))

        def body() -> Body:
            return {"markers": [{"producer_id": pid, "topics": [
                {"name": name, "partitions": [{"partition_index": i, "error_code": int(e)} for i, e in errs.items()]}
                for name, errs in by_topic.items()]} for pid, by_topic in results]}

        def complete(timed_out: bool) -> Body:
            for errs, i, w in waits:
                if w.lost():
                    _MARKER_LOST()
                    errs[i] = Err.NOT_LEADER_OR_FOLLOWER
                elif not w.replicated() and not self.ack_before_replication:
                    errs[i] = Err.REQUEST_TIMED_OUT
                else:
                    self.core.control_listener.on_control_batch(w.p.tp, w.producer_id, w.producer_epoch, w.commit,
                                                                w.offset)
            return body()

        def ready() -> bool:
            return self.ack_before_replication or all(w.replicated() or w.lost() for _, _, w in waits)

        if not waits:
            return Reply(version, body())
        deadline = self.core.clock.monotonic_ms() + MARKER_TIMEOUT_MS
        keys = frozenset(w.p.tp for _, _, w in waits)
        return Reply(version, deferred=self.core.purgatory.add(Deferred(ready, complete, deadline, version, keys)))

    def _write(self, tp: TopicPartition, producer_id: int, producer_epoch: int, marker: ControlMarker,
               strict: bool) -> tuple[Err, _Written | None]:
        p = self.core.partitions.get(tp)
        if p is None:
            known = tp.partition in self.core.metadata.topics.get(tp.topic, {})
            return (Err.NOT_LEADER_OR_FOLLOWER if known else Err.UNKNOWN_TOPIC_OR_PARTITION), None
        if not p.is_leader():
            return Err.NOT_LEADER_OR_FOLLOWER, None
        err = self.core.replication.accepts_produce(p)
        if err == Err.NONE:
            err = p.producers.check_marker(producer_id, producer_epoch, marker.coordinator_epoch, strict_epoch=strict)
        if err != Err.NONE:
            if err != Err.NOT_ENOUGH_REPLICAS:
                _MARKER_REFUSED()
            log.info("%s: refusing %s marker of producer %d epoch %d (coordinator epoch %d): %s", tp,
                     "COMMIT" if marker.commit else "ABORT", producer_id, producer_epoch, marker.coordinator_epoch,
                     err.name)
            return err, None
        info = p.append_as_leader(marker_batch(producer_id, producer_epoch, marker, self.core.clock.now_ms()))
        self.core.replication.on_leader_append(p)
        self.core.purgatory.check([tp])
        return Err.NONE, _Written(p, p.leader_epoch, info.base_offset, producer_id, producer_epoch, marker.commit)

