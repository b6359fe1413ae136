"""DescribeProducers (API 61, KIP-664), on a partition leader: the producers a partition knows, and the
offset where each one's open transaction began.

Why: a *hanging* transaction — one whose coordinator will never send its marker (a coordinator bug, a
marker lost to a leader that acknowledged it before replication) — holds the partition's LSO, so
read_committed consumers stall behind it for good. `kafka-transactions.sh find-hanging` asks the
partition leaders for their producers with an open transaction (`current_txn_start_offset` >= 0)
and the coordinators whether they know of them; `kafka-transactions.sh abort` then writes the ABORT
marker itself (WriteTxnMarkers, `txn_markers.py`). Per partition, as Kafka: NOT_LEADER_OR_FOLLOWER
when not led here, UNKNOWN_TOPIC_OR_PARTITION when there is no such partition.
"""

from __future__ import annotations

from typing import Any

from logbroker.core.leader_host import LeaderHost
from logbroker.core.names import TopicPartition
from logbroker.core.reply import Reply
from logbroker.protocol.errors import Err


def describe_producers(core: LeaderHost, version: int, req: Any) -> Reply:
    topics = []
    for t in req.topics:
        parts = []
        for i in t.partition_indexes:
            p = core.partitions.get(TopicPartition(t.name, i))
            err = Err.NONE
            if p is None:
                known = i in core.metadata.topics.get(t.name, {})
                err = Err.NOT_LEADER_OR_FOLLOWER if known else Err.UNKNOWN_TOPIC_OR_PARTITION
            elif not p.is_leader():
                err = Err.NOT_LEADER_OR_FOLLOWER
            producers = [] if p is None or err != Err.NONE else [
                {"producer_id": pid, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                 "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                 "current_txn_start_offset": e.txn_first_offset}
                for pid, e in sorted(p.producers.producers.items())]
            parts.append({"partition_index": i, "error_code": int(err), "error_message": None,
                          "active_producers": producers})
        topics.append({"name": t.name, "partitions": parts})
    return Reply(version, {"throttle_time_ms": 0, "topics": topics})
