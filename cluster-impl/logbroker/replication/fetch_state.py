"""What one replica fetcher (this follower, one leader broker) knows and decides; sans-IO.

Kafka's follower runs one fetcher per leader broker, and so do we: a single Fetch names every
partition we follow from that leader, so 160 followed partitions cost one request, not 160
serialised long-polls (the design that let ISRs shrink on an idle cluster). This module holds the
decisions; `fetcher.py` does the sockets and the log writes.

Each followed partition is in one state:
- TRUNCATING: a new leader epoch (or an offset the leader says is out of range): ask the leader
  where our log diverges (OffsetForLeaderEpoch, `truncation.py`) before fetching again;
- FETCHING: in the next Fetch, at our log end offset;
- DELAYED: the leader refused it (not the leader yet, a different leader epoch, a bad batch);
  retried after `backoff_ms`, from truncation when the epochs disagreed.

The client side of fetch sessions (KIP-227) lives here too: the first Fetch is full and opens a
session; later ones are incremental and name only partitions that were added or whose position
changed, plus those to forget. Any session error, a lost response or a closed connection makes
the next request full again. Time comes in as `now_ms`; nothing here sleeps or reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from logbroker.protocol.errors import Err

Key = tuple[str, int]
INITIAL_EPOCH, FINAL_EPOCH = 0, -1

#: partition errors after which the fetch position is right but the leader is not ready for it
RETRY_LATER = {Err.NOT_LEADER_OR_FOLLOWER, Err.UNKNOWN_TOPIC_OR_PARTITION, Err.UNKNOWN_LEADER_EPOCH,
               Err.LEADER_NOT_AVAILABLE, Err.REQUEST_TIMED_OUT}


class FetchStatus(StrEnum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    DELAYED = "delayed"


@dataclass(slots=True)
class Followed:
    leader_epoch: int
    fetch_offset: int
    status: FetchStatus = FetchStatus.TRUNCATING
    retry_at_ms: int = 0
    truncate_after_delay: bool = False


@dataclass(frozen=True, slots=True)
class Position:
    """What a fetch request says about one partition; a change is what an incremental request sends."""

    fetch_offset: int
    leader_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchPlan:
    session_id: int
    session_epoch: int
    send: dict[Key, Position]  # full: everything; incremental: added or changed
    forget: list[Key]
    full: bool
    positions: dict[Key, Position]  # every partition this request fetches, sent or not


@dataclass
class FetchSessionClient:
    """KIP-227, the client's half: what the leader's session holds, as far as we know."""

    session_id: int = 0
    next_epoch: int = INITIAL_EPOCH
    known: dict[Key, Position] = field(default_factory=dict)  # the session's partitions as last sent
    pending: dict[Key, Position] | None = None  # the in-flight request's full view

    def plan(self, wanted: dict[Key, Position]) -> FetchPlan:
        full = self.next_epoch == INITIAL_EPOCH
        if full:
            send = dict(wanted)
            forget: list[Key] = []
        else:
            send = {k: pos for k, pos in wanted.items() if self.known.get(k) != pos}
            forget = [k for k in self.known if k not in wanted]
        self.pending = dict(wanted)
        return FetchPlan(self.session_id, self.next_epoch, send, forget, full, self.pending)

    def on_response(self, error: int, session_id: int) -> None:
        """A response arrived for the last plan."""
        wanted, self.pending = self.pending or {}, None
        if error:  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...: start a new session
            self.session_id, self.next_epoch, self.known = 0, INITIAL_EPOCH, {}
            return
        if session_id == 0:  # the leader keeps no session for us: every request is full
            self.session_id, self.next_epoch, self.known = 0, INITIAL_EPOCH, {}
            return
        if self.next_epoch == INITIAL_EPOCH or session_id != self.session_id:
            self.session_id = session_id
            self.next_epoch = 1
        else:
            self.next_epoch = self.next_epoch + 1 if self.next_epoch < 2**31 - 1 else 1
        self.known = wanted

    def on_failure(self) -> None:
        """No response (timeout, closed connection): the leader may or may not have seen the request,
        so our view of its session is unknown. Close it and open a new one with the next request."""
        self.pending = None
        self.next_epoch, self.known = INITIAL_EPOCH, {}


class FetcherState:
    """The partitions one follower fetches from one leader, and the session with that leader."""

    def __init__(self, backoff_ms: int = 100, partition_max_bytes: int = 1 << 20) -> None:
        self.backoff_ms = backoff_ms
        self.partition_max_bytes = partition_max_bytes
        self.partitions: dict[Key, Followed] = {}
        self.session = FetchSessionClient()

    # --- membership (LeaderAndIsr, StopReplica) --------------------------------------------------
    def add(self, key: Key, leader_epoch: int, log_end_offset: int) -> None:
        """Follow `key` at `leader_epoch`: always from truncation, since a new epoch may mean our tail
        diverged from the new leader's log (KIP-101)."""
        self.partitions[key] = Followed(leader_epoch, log_end_offset)

    def remove(self, key: Key) -> None:
        self.partitions.pop(key, None)

    def __len__(self) -> int:
        return len(self.partitions)

    # --- what to do next -----------------------------------------------------------------------
    def wake_delayed(self, now_ms: int) -> None:
        for f in self.partitions.values():
            if f.status is FetchStatus.DELAYED and now_ms >= f.retry_at_ms:
                f.status = FetchStatus.TRUNCATING if f.truncate_after_delay else FetchStatus.FETCHING
                f.truncate_after_delay = False

    def next_wake_ms(self) -> int | None:
        """When the earliest delayed partition may be retried (None if none is delayed)."""
        times = [f.retry_at_ms for f in self.partitions.values() if f.status is FetchStatus.DELAYED]
        return min(times) if times else None

    def to_truncate(self) -> dict[Key, int]:
        """Partitions waiting for truncation, with the leader epoch they follow."""
        return {k: f.leader_epoch for k, f in self.partitions.items() if f.status is FetchStatus.TRUNCATING}

    def truncated(self, key: Key, leader_epoch: int, log_end_offset: int) -> None:
        """Truncation finished for the epoch it was started at; a newer `add` wins."""
        f = self.partitions.get(key)
        if f is not None and f.leader_epoch == leader_epoch and f.status is FetchStatus.TRUNCATING:
            f.status, f.fetch_offset = FetchStatus.FETCHING, log_end_offset

    def fetchable(self) -> dict[Key, Position]:
        return {k: Position(f.fetch_offset, f.leader_epoch, self.partition_max_bytes)
                for k, f in self.partitions.items() if f.status is FetchStatus.FETCHING}

    def plan(self) -> FetchPlan | None:
        """The next Fetch, or None when no partition can be fetched (nothing to long-poll for)."""
        wanted = self.fetchable()
        if not wanted:
            return None
        return self.session.plan(wanted)

    # --- outcomes ------------------------------------------------------------------------------
    def still_fetching(self, key: Key, sent: Position) -> bool:
        """Is a response for `key` to the request that carried `sent` still ours to apply? Not if the
        partition was removed, re-added at another epoch, or moved (truncated) meanwhile."""
        f = self.partitions.get(key)
        return (f is not None and f.status is FetchStatus.FETCHING and f.leader_epoch == sent.leader_epoch
                and f.fetch_offset == sent.fetch_offset)

    def advanced(self, key: Key, log_end_offset: int) -> None:
        f = self.partitions.get(key)
        if f is not None:
            f.fetch_offset = log_end_offset

    def truncation_failed(self, key: Key, leader_epoch: int, now_ms: int) -> None:
        """The leader could not answer OffsetForLeaderEpoch yet: ask again after a backoff."""
        f = self.partitions.get(key)
        if f is not None and f.leader_epoch == leader_epoch and f.status is FetchStatus.TRUNCATING:
            f.status, f.retry_at_ms, f.truncate_after_delay = FetchStatus.DELAYED, now_ms + self.backoff_ms, True

    def partition_error(self, key: Key, error: int, now_ms: int) -> None:
        """Kafka's follower rules: OFFSET_OUT_OF_RANGE truncates again at once; a fenced epoch waits
        for the controller's word and then truncates; anything else retries after a backoff."""
        f = self.partitions.get(key)
        if f is None:
            return
        if error == Err.OFFSET_OUT_OF_RANGE:
            f.status = FetchStatus.TRUNCATING
            return
        f.status, f.retry_at_ms = FetchStatus.DELAYED, now_ms + self.backoff_ms
        f.truncate_after_delay = error not in RETRY_LATER

    def failed(self, now_ms: int, *, restart: bool = False) -> None:
        """The whole request failed (connection, timeout): the session is gone; every partition waits
        a backoff, and with `restart` (an unexpected error) starts over from truncation."""
        self.session.on_failure()
        for f in self.partitions.values():
            if f.status is FetchStatus.FETCHING or restart:
                f.status, f.retry_at_ms = FetchStatus.DELAYED, now_ms + self.backoff_ms
                f.truncate_after_delay = f.truncate_after_delay or restart
