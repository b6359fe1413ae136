"""Where a group lives and what its records in `__consumer_offsets` look like.

The partition follows Kafka: `abs(groupId.hashCode()) % partitions` with Java's `String.hashCode`,
so a group's coordinator is the one a Kafka cluster with the same partition count would pick.

The records are ours, not Kafka's binary schemas (nothing reads this topic but the coordinator):
a key and value of compact JSON. Two kinds, as in Kafka, and the last record of a key wins:
- an offset commit, key `{"k": "offset", "group", "topic", "partition"}`, value
  `{"offset", "leader_epoch", "metadata", "commit_ms"}`;
- a group's metadata, key `{"k": "group", "group"}`, value `{"generation", "protocol_type",
  "protocol", "leader", "members": [...]}`, written when a generation's assignment is complete,
  when a group becomes empty, and when a static member's new id replaces its old one; each member
  has its `group_instance_id` (null for a dynamic member; absent in records from before static
  membership, read as null).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % partitions` (its abs maps MIN_VALUE to 0)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def offset_record(key: OffsetKey, value: OffsetValue) -> tuple[bytes, bytes]:
    return (_dump({"k": "offset", "group": key.group, "topic": key.topic, "partition": key.partition}),
            _dump({"offset": value.offset, "leader_epoch": value.leader_epoch, "metadata": value.metadata,
                   "commit_ms": value.commit_ms}))


def group_record(group: str, snapshot: dict[str, Any]) -> tuple[bytes, bytes]:
    return _dump({"k": "group", "group": group}), _dump(snapshot)


def decode(key: bytes | None, value: bytes | None) -> tuple[OffsetKey | GroupKey, Any] | None:
    """(key, value) of one record: an `OffsetValue` or a group snapshot dict; None for a record we
    do not know (skipped, so a future kind does not stop a load)."""
    if key is None or value is None:
        return None
    k = json.loads(key)
    v = json.loads(value)
    if k.get("k") == "offset":
        return (OffsetKey(k["group"], k["topic"], int(k["partition"])),
                OffsetValue(int(v["offset"]), int(v["leader_epoch"]), str(v["metadata"]), int(v["commit_ms"])))
    if k.get("k") == "group":
        return GroupKey(k["group"]), v
    return None
