"""One partition replica on this broker: its log, its role, leader epoch, high watermark, ISR.

The replication seam (cluster-impl II) lives here: a leader tracks follower LEOs and sets
HW = min LEO over the ISR; a follower takes the leader's HW. In standalone mode this broker is the
only replica, ISR = {self}, so HW follows LEO at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from logbroker.core.producer_state import ProducerStateTable
from logbroker.log.log import Log


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


@dataclass
class Partition:
    tp: TopicPartition
    log: Log
    broker_id: int
    role: Role = Role.NONE
    leader_id: int = -1
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    hw: int = 0
    follower_leo: dict[int, int] = field(default_factory=dict)
    follower_caught_up_ms: dict[int, int] = field(default_factory=dict)
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)

    @property
    def leo(self) -> int:
        return self.log.leo

    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the ISR (the leader's own LEO included); never moves back. True if it moved."""
        if not self.is_leader():
            return False
        leos = [self.leo]
        for r in self.isr:
            if r != self.broker_id:
                leos.append(self.follower_leo.get(r, 0))
        new_hw = min(leos)
        if new_hw > self.hw:
            self.hw = new_hw
            return True
        return False
