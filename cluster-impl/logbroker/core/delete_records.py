"""DeleteRecords (API 21) on a partition leader: move the log start offset forward (KIP-107).

librdkafka's transaction tests use it (0103 deletes a committed transaction's records, markers
included, then expects the producer to go on). Per partition, as Kafka: INVALID_TOPIC_EXCEPTION for an
internal topic, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE for an offset
above the high watermark (-1 means the HW); the answer's low watermark is the new log start offset.

Differences from Kafka, both because this broker has no retention: the records are deleted logically
(consumers cannot read below the log start and ListOffsets earliest is past them; the bytes stay, so a
follower behind the new start still replicates through them), and the request is answered once the
leader has moved its log start, not once every live replica has (followers take the leader's log start
from each fetch response; one that becomes leader before it fetched again starts lower). Producer
state is not evicted for producers whose records were deleted (Kafka's KIP-360 forgets them, and then
accepts any sequence from them): their sequences continue.
"""

from __future__ import annotations

from typing import Any

from logbroker.core.leader_host import LeaderHost
from logbroker.core.names import TopicPartition
from logbroker.core.reply import Reply
from logbroker.protocol.errors import Err


def delete_records(core: LeaderHost, version: int, req: Any) -> Reply:
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            tp = TopicPartition(t.name, rp.partition_index)
            p = core.partitions.get(tp)
            low, err = -1, Err.NONE
            if t.name.startswith("__"):
                err = Err.INVALID_TOPIC_EXCEPTION
            elif p is None:
                known = rp.partition_index in core.metadata.topics.get(t.name, {})
                err = Err.NOT_LEADER_OR_FOLLOWER if known else Err.UNKNOWN_TOPIC_OR_PARTITION
            elif not p.is_leader():
                err = Err.NOT_LEADER_OR_FOLLOWER
            else:
                offset = p.hw if rp.offset == -1 else rp.offset
                if offset < 0 or offset > p.hw:
                    err = Err.OFFSET_OUT_OF_RANGE
                else:
                    if p.log.advance_start(offset):
                        core.purgatory.check([tp])  # fetches waiting below the new start learn it
                    low = p.log.log_start_offset
            parts.append({"partition_index": rp.partition_index, "low_watermark": low, "error_code": int(err)})
        topics.append({"name": t.name, "partitions": parts})
    return Reply(version, {"throttle_time_ms": 0, "topics": topics})
