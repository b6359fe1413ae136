"""Fetch sessions (KIP-227), the leader's side; sans-IO.

Why: a follower fetches every partition it follows from one leader in one request. Without
sessions that request, and its response, name every partition every time — 160 idle partitions
cost 160 entries each way, several times a second. With a session the broker remembers the
partitions and their fetch offsets; an *incremental* request names only what changed (a new
fetch offset, a partition added or forgotten) and its response carries only the partitions with
something to say (records, an error, a new high watermark or log start offset). An idle partition
then costs nothing on the wire.

Request metadata (session id, epoch), as in the protocol:
- (0, -1): a sessionless full fetch; (id, -1): close session `id`, then a sessionless full fetch;
- (0 or id, 0): a full fetch that (closes `id` and) creates a new session, answered with its id —
  or with id 0 when the cache has no room, and the client keeps sending full fetches;
- (id, n > 0): incremental; n must be the session's next epoch (INVALID_FETCH_SESSION_EPOCH),
  an unknown id is FETCH_SESSION_ID_NOT_FOUND.

The cache is bounded (`max_sessions`); when full, the least recently used session idle for at least
`evict_after_ms` makes room, as Kafka's `max.incremental.fetch.session.cache.slots` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from logbroker.protocol.errors import Err

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1

Key = tuple[str, int]


@dataclass(slots=True)
class SessionPartition:
    """One partition in a fetch: what the client asked for, and what we last told it."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    sent_hw: int = -2  # -2: never sent, so the first response always carries it
    sent_log_start: int = -2
    sent_lso: int = -2


@dataclass
class FetchSession:
    session_id: int
    next_epoch: int
    partitions: dict[Key, SessionPartition]
    last_used_ms: int


@dataclass
class FetchContext:
    """What one Fetch request fetches, resolved against the cache.

    `partitions` is the request's scope, in response order. `full`: every partition is answered;
    otherwise (incremental) only those with something to report. `session` is None for a
    sessionless fetch; `response_session_id` goes into the response."""

    partitions: dict[Key, SessionPartition]
    full: bool
    response_session_id: int = INVALID_SESSION_ID
    error: Err = Err.NONE
    session: FetchSession | None = None
    forgotten: list[Key] = field(default_factory=list)

    def rotate(self, served: Iterable[Key]) -> None:
        """Partitions that just returned records go to the back of the session's order, so a few busy
        partitions cannot take every response's byte budget (KIP-227's fairness rule)."""
        if self.session is None:
            return
        for k in served:
            sp = self.session.partitions.pop(k, None)
            if sp is not None:
                self.session.partitions[k] = sp


class FetchSessionCache:
    def __init__(self, max_sessions: int = 1000, evict_after_ms: int = 120_000) -> None:
        self.max_sessions = max_sessions
        self.evict_after_ms = evict_after_ms
        self.sessions: dict[int, FetchSession] = {}  # insertion order = least recently used first
        self._next_id = 1

    def new_context(self, session_id: int, epoch: int, wanted: dict[Key, SessionPartition],
                    forgotten: Iterable[Key], now_ms: int) -> FetchContext:
        """Resolve one request: `wanted` are the partitions it names (with their fetch positions)."""
        if epoch == FINAL_EPOCH:
            self.sessions.pop(session_id, None)
            return FetchContext(dict(wanted), full=True)
        if epoch == INITIAL_EPOCH:
            self.sessions.pop(session_id, None)
            session = self._create(dict(wanted), now_ms)
            if session is None:
                return FetchContext(dict(wanted), full=True)
            return FetchContext(session.partitions, full=True, response_session_id=session.session_id,
                                session=session)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext({}, full=True, error=Err.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.next_epoch:
            return FetchContext({}, full=True, error=Err.INVALID_FETCH_SESSION_EPOCH)
        gone = []
        for k in forgotten:
            if session.partitions.pop(k, None) is not None:
                gone.append(k)
        for k, sp in wanted.items():
            old = session.partitions.get(k)
            if old is None:
                session.partitions[k] = sp
            else:
                old.fetch_offset, old.max_bytes = sp.fetch_offset, sp.max_bytes
                old.current_leader_epoch = sp.current_leader_epoch
        session.next_epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.last_used_ms = now_ms
        self.sessions[session_id] = self.sessions.pop(session_id)  # most recently used
        return FetchContext(session.partitions, full=False, response_session_id=session_id, session=session,
                            forgotten=gone)

    def _create(self, partitions: dict[Key, SessionPartition], now_ms: int) -> FetchSession | None:
        if len(self.sessions) >= self.max_sessions:
            oldest_id, oldest = next(iter(self.sessions.items()))
            if now_ms - oldest.last_used_ms < self.evict_after_ms:
                return None  # everyone is busy: serve this client without a session
            del self.sessions[oldest_id]
        sid = self._next_id
        while sid == INVALID_SESSION_ID or sid in self.sessions:
            sid = (sid + 1) % 2**31
        self._next_id = (sid + 1) % 2**31
        session = FetchSession(sid, 1, partitions, now_ms)
        self.sessions[sid] = session
        return session

    def __len__(self) -> int:
        return len(self.sessions)
