"""Names of partitions and replica roles: plain values, importable by pure code (no log, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"  # assigned here but not (yet) told its role


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, name: str) -> TopicPartition:
        topic, _, p = name.rpartition("-")
        return cls(topic, int(p))
