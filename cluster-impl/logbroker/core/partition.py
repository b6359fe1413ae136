"""One partition replica on this broker: its log, its role, leader epoch, high watermark, ISR.

The replication seam (cluster-impl II) lives here: a leader tracks follower LEOs and sets
HW = min LEO over the ISR; a follower takes the leader's HW. In standalone mode this broker is the
only replica, ISR = {self}, so HW follows LEO at once.

Every append and truncation goes through this object, not the log alone, so the producer state
(idempotence, open transactions), the aborted-transaction index and the producer snapshots always
describe exactly the log: on the leader, on a follower, after a restart and after a truncation.
The last stable offset (LSO), what read_committed consumers may read up to, is the HW or the first
offset of a transaction that is still open (or whose marker is not yet below the HW), whichever is
lower.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from logbroker.core.names import Role, TopicPartition
from logbroker.core.producer_state import CompletedTxn, ProducerStateTable
from logbroker.log import snapshots
from logbroker.log.batch import BatchHeader
from logbroker.log.control import read_marker
from logbroker.log.log import AppendInfo, Log
from logbroker.log.txn_index import AbortedTxn
from logbroker.probes import probe

__all__ = ["Partition", "Role", "TopicPartition"]

log = logging.getLogger(__name__)
_REOPENS_TXN = probe("truncation-reopens-transaction")


@dataclass
class Partition:
    tp: TopicPartition
    log: Log
    broker_id: int
    role: Role = Role.NONE
    leader_id: int = -1
    leader_epoch: int = 0
    #: the log end offset when this replica became leader at `leader_epoch`: until the HW reaches it,
    #: the HW it inherited as a follower may be behind what the previous leader had told clients
    #: (KIP-207), so ListOffsets answers OFFSET_NOT_AVAILABLE instead of an end that went backwards
    epoch_start_offset: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    #: ISR members the leader added itself, not yet written by the controller (KIP-497's maximal ISR):
    #: HW waits for them, but they do not count towards min.insync.replicas (`maybe_advance_hw`)
    uncommitted_isr: frozenset[int] = frozenset()
    hw: int = 0
    follower_leo: dict[int, int] = field(default_factory=dict)
    follower_caught_up_ms: dict[int, int] = field(default_factory=dict)
    follower_last_fetch: dict[int, tuple[int, int]] = field(default_factory=dict)  # (leader LEO, time) then
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    #: bug switch `lso-ignores-open-txns` (logbroker/bugs.py): the LSO is the HW
    lso_is_hw: bool = False

    @property
    def leo(self) -> int:
        return self.log.leo

    @property
    def lso(self) -> int:
        """Last stable offset: read_committed fetches see the log below it (never below the log start:
        DeleteRecords may remove the beginning of a transaction, as in Kafka)."""
        if self.lso_is_hw:
            return self.hw
        first = self.producers.first_unstable(self.hw)
        return self.hw if first is None or first > self.hw else max(first, self.log.log_start_offset)

    # --- appends, truncation, producer state ---------------------------------------------------------
    def append_as_leader(self, records: bytes) -> AppendInfo:
        """Append (offsets and our leader epoch stamped) and fold the batches into the producer state."""
        info = self.log.append_as_leader(records, self.leader_epoch)
        self._applied(info)
        return info

    def append_as_follower(self, records: bytes) -> AppendInfo | None:
        info = self.log.append_as_follower(records)
        if info is not None:
            self._applied(info)
        return info

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: cut the log, then rebuild the producer state for what is left (an
        open transaction whose marker was cut is open again)."""
        if offset < self.leo:
            was_open = set(self.producers.ongoing.items())
            self.log.truncate_to(offset)
            self.load_producer_state()
            if set(self.producers.ongoing.items()) - was_open:  # a transaction open again, from its first offset
                _REOPENS_TXN()

    def load_producer_state(self) -> None:
        """The latest snapshot at or below the log end, then a replay of the batches after it."""
        got = snapshots.latest(self.log.dir, self.leo)
        start = self.log.first_offset
        self.producers = ProducerStateTable()
        if got is not None:
            try:
                self.producers = ProducerStateTable.from_snapshot(got[1])
                start = got[0]
            except (ValueError, KeyError, TypeError) as e:
                log.warning("%s: producer snapshot at %d unusable (%s); replaying the whole log", self.tp, got[0], e)
        for h, raw in self.log.batches_from(start):
            self._apply(h, raw if h.is_control else None)

    def snapshot(self) -> None:
        """Save the producer state at the log end (the aborted-transaction index is flushed first, so
        the entries it holds below the snapshot are durable when the snapshot is)."""
        self.log.aborted.flush()
        snapshots.write(self.log.dir, self.leo, self.producers.to_snapshot())

    def _applied(self, info: AppendInfo) -> None:
        controls = iter(info.controls)
        for h in info.headers:
            self._apply(h, next(controls) if h.is_control else None)
        if self.log.rolled:
            self.log.rolled = False
            self.snapshot()

    def _apply(self, h: BatchHeader, raw: bytes | None) -> CompletedTxn | None:
        done = self.producers.apply(h, read_marker(raw, h) if raw is not None else None)
        if done is not None and done.aborted:
            self.log.aborted.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                               self.producers.lso_after(done)))
        return done

    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def hw_known(self) -> bool:
        """The HW has caught up with this leader's epoch start (KIP-207): only then is it at least
        every HW an earlier leader of the partition may have answered."""
        return self.hw >= self.epoch_start_offset

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

    def set_isr(self, isr: list[int], *, committed: bool = True) -> None:
        """A new ISR: written by the controller (`committed`), or the leader's own expansion that is
        still on its way there (its new members are then uncommitted until the next committed ISR)."""
        self.uncommitted_isr = frozenset() if committed else self.uncommitted_isr | (set(isr) - set(self.isr))
        self.isr = isr

    def under_min_isr(self, min_isr: int) -> bool:
        """Fewer committed ISR members than the effective min.insync.replicas (`min_isr`, already
        capped at the replica count by the caller, KAFKA-15583)."""
        return len([r for r in self.isr if r not in self.uncommitted_isr]) < min_isr

    def maybe_advance_hw(self, min_isr: int = 1) -> bool:
        """HW = min LEO over the ISR (the leader's own LEO included); never moves back. True if it moved.

        Not while the partition is under min ISR (`min_isr`: the effective min.insync.replicas; 1, the
        default, is a single-replica partition's): KIP-966's strict min ISR rule (KAFKA-15583, Kafka
        3.7). The controller keeps a replica that leaves an ISR which is (or so becomes) smaller than
        min.insync.replicas as an eligible leader (`controller.decisions.next_elr`) because nothing
        can be committed without it; a leader that still advanced HW over its lone ISR would let
        consumers read records that replica lacks, and electing it truncates them (seed 70150: offsets
        read below the HW, then rewritten in the next leader epoch). Requests waiting on HW simply wait
        (acks=all is refused at the door while under min ISR anyway)."""
        if not self.is_leader() or self.under_min_isr(min_isr):
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
