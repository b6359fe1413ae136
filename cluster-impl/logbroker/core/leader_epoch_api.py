"""OffsetForLeaderEpoch (API 23) for clients: KIP-320's position validation after a leader change.

A consumer whose partition's leader epoch moved on asks the new leader where the epoch of its
position ended; if that is below its position, the log was truncated under it. Followers ask the
same question through the private control API (`protocol/internal.py`); clients need the public
one. kafka-python 3.0 validates after every leader change and, against a broker that does not
offer the API, retries forever without fetching again: one of the partitions issue 27's group
failover left unconsumed. (The Java client skips validation then; librdkafka too.)

The answer is Kafka's: the largest epoch <= the one asked for, and its end offset (the log end
offset for the latest epoch); FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the request's
current leader epoch is older / newer than ours; NOT_LEADER_OR_FOLLOWER on a follower.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.reply import Reply
from logbroker.protocol.errors import Err


def _epoch_error(p: Partition, current_leader_epoch: int) -> Err:
    if current_leader_epoch < 0 or current_leader_epoch == p.leader_epoch:
        return Err.NONE
    return Err.FENCED_LEADER_EPOCH if current_leader_epoch < p.leader_epoch else Err.UNKNOWN_LEADER_EPOCH


def offset_for_leader_epoch(partitions: Mapping[TopicPartition, Partition], version: int, req: Any) -> Reply:
    topics = []
    for t in req.topics:
        out = []
        for q in t.partitions:
            p = partitions.get(TopicPartition(t.topic, q.partition))
            r: dict[str, Any] = {"partition": q.partition, "leader_epoch": -1, "end_offset": -1}
            if p is None:
                r["error_code"] = int(Err.UNKNOWN_TOPIC_OR_PARTITION)
            elif not p.is_leader():
                r["error_code"] = int(Err.NOT_LEADER_OR_FOLLOWER)
            elif (err := _epoch_error(p, q.current_leader_epoch)) != Err.NONE:
                r["error_code"] = int(err)
            else:
                r["error_code"] = 0
                r["leader_epoch"], r["end_offset"] = p.log.epochs.end_offset_for(q.leader_epoch, p.leo)
            out.append(r)
        topics.append({"topic": t.topic, "partitions": out})
    return Reply(version, {"throttle_time_ms": 0, "topics": topics})
