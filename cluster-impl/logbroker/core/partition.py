"""One partition replica on this broker: its log, its role, leader epoch, high watermark, ISR.

The replication seam (cluster-impl II) lives here: a leader tracks follower LEOs and sets
HW = min LEO over the ISR; a follower takes the leader's HW. In standalone mode this broker is the
only replica, ISR = {self}, so HW follows LEO at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from logbroker.core.names import Role, TopicPartition
from logbroker.core.producer_state import ProducerStateTable
from logbroker.log.log import Log

__all__ = ["Partition", "Role", "TopicPartition"]


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
    follower_last_fetch: dict[int, tuple[int, int]] = field(default_factory=dict)  # (leader LEO, time) then
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)

    @property
    def leo(self) -> int:
        return self.log.leo

    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def record_follower_fetch(self, replica: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched at `fetch_offset`, which is its log end offset. Kafka's rule for when it
        was last caught up: now, if it has everything; else at its previous fetch, if it now has
        everything we had then. The second half keeps a follower of a busy partition in the ISR: the
        leader's LEO moves on between any two fetches, yet the follower is never further behind than
        one fetch."""
        self.follower_leo[replica] = fetch_offset
        prev_leo, prev_ms = self.follower_last_fetch.get(replica, (0, 0))
        caught = self.follower_caught_up_ms.get(replica, 0)
        if fetch_offset >= self.leo:
            caught = max(caught, now_ms)
        elif fetch_offset >= prev_leo:
            caught = max(caught, prev_ms)
        self.follower_caught_up_ms[replica] = caught
        self.follower_last_fetch[replica] = (self.leo, now_ms)

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
