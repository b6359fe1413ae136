"""One consumer group's state machine (Kafka's generic group protocol); pure, time passed in.

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                  ▲      │ (no member left: Empty, generation + 1)        │ leader's SyncGroup,
      │                  │      ▼                                                │ group record written
      └── last member ───┴── Stable ◀────────────────────────────────────────────┘
          leaves or expires    (a join with new protocols, the leader's join, a leave or an expiry
                               starts the next rebalance)

A rebalance ends when every member has sent JoinGroup again (and no member id handed out with
MEMBER_ID_REQUIRED is still outstanding), or at the rebalance timeout (the largest of the members'),
when members that did not rejoin are dropped. Each completed join starts a new generation; the
leader (kept if still a member, else the first) gets every member's subscription and sends the
assignment in its SyncGroup. The first rebalance of an empty group waits
`group.initial.rebalance.delay.ms`, so members starting together land in one generation.
A member that does not heartbeat within its session timeout is removed, except while it waits for
its JoinGroup or SyncGroup answer.

Answers to JoinGroup and SyncGroup that must wait are `Waiter`s; the coordinator turns them into
responses when `result` is set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from logbroker.protocol.errors import Err


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING = "PreparingRebalance"
    COMPLETING = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Waiter:
    """An answer that may come later: the response fields once known."""

    result: dict[str, Any] | None = None

    def fail(self, err: Err, **fields: Any) -> Waiter:
        if self.result is None:
            self.result = {"error_code": int(err), **fields}
        return self

    def succeed(self, **fields: Any) -> None:
        if self.result is None:
            self.result = {"error_code": 0, **fields}


@dataclass(frozen=True, slots=True)
class JoinArgs:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool  # JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    heartbeat_deadline_ms: int = 0
    assignment: bytes = b""
    join: Waiter | None = None
    sync: Waiter | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return dict(self.protocols).get(protocol or "", b"")


@dataclass
class Group:
    group_id: str
    initial_delay_ms: int
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # member ids handed out → deadline
    rebalance_deadline_ms: int = 0
    join_not_before_ms: int = 0
    assigned: bool = False  # CompletingRebalance: the leader's assignment waits to be written
    write_wanted: bool = False  # the coordinator should write this group's record now

    # --- JoinGroup ---------------------------------------------------------------------------------
    def join(self, now: int, a: JoinArgs, new_member_id: Callable[[str], str]) -> Waiter:
        w = Waiter()
        if not self._accepts_protocols(a):
            return w.fail(Err.INCONSISTENT_GROUP_PROTOCOL, member_id=a.member_id)
        if a.member_id == "":
            mid = new_member_id(a.client_id)
            if a.require_known_member_id:
                self.pending[mid] = now + a.session_timeout_ms
                return w.fail(Err.MEMBER_ID_REQUIRED, member_id=mid)
            self._add(now, mid, a, w)
            return w
        if self.pending.pop(a.member_id, None) is not None:
            self._add(now, a.member_id, a, w)
            return w
        m = self.members.get(a.member_id)
        if m is None:
            return w.fail(Err.UNKNOWN_MEMBER_ID, member_id=a.member_id)
        if self.state is GroupState.PREPARING:
            self._update(now, m, a, w)
            self._maybe_complete_join(now)
        elif self.state is GroupState.COMPLETING and m.protocols == a.protocols:
            w.succeed(**self._join_fields(m))  # a lost JoinGroup answer, asked again
        elif self.state is GroupState.STABLE and m.protocols == a.protocols and m.member_id != self.leader:
            w.succeed(**self._join_fields(m))
        else:  # new protocols, or the leader rejoins (it wants a new assignment)
            self._update(now, m, a, w)
            self._prepare(now)
        return w

    def _accepts_protocols(self, a: JoinArgs) -> bool:
        names = {n for n, _ in a.protocols}
        if not self.members:
            return bool(a.protocol_type) and bool(names)
        return a.protocol_type == self.protocol_type and bool(names & self._candidates())

    def _candidates(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _add(self, now: int, mid: str, a: JoinArgs, w: Waiter) -> None:
        if not self.members:
            self.protocol_type = a.protocol_type
        m = Member(mid, a.client_id, a.client_host, a.session_timeout_ms, a.rebalance_timeout_ms, a.protocols,
                   heartbeat_deadline_ms=now + a.session_timeout_ms, join=w)
        self.members[mid] = m
        if self.leader is None:
            self.leader = mid
        if self.state is GroupState.PREPARING:
            self._maybe_complete_join(now)
        else:
            self._prepare(now)

    def _update(self, now: int, m: Member, a: JoinArgs, w: Waiter) -> None:
        if m.join is not None:  # asked twice: the first answer is superseded
            m.join.fail(Err.REBALANCE_IN_PROGRESS, member_id=m.member_id)
        m.protocols, m.join = a.protocols, w
        m.session_timeout_ms, m.rebalance_timeout_ms = a.session_timeout_ms, a.rebalance_timeout_ms
        m.heartbeat_deadline_ms = now + a.session_timeout_ms

    def _prepare(self, now: int) -> None:
        """Start a rebalance: members must rejoin within the rebalance timeout."""
        if self.state is GroupState.COMPLETING:
            self._reset_assignment(Err.REBALANCE_IN_PROGRESS)
        initial = self.state is GroupState.EMPTY
        self.state = GroupState.PREPARING
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline_ms = now + timeout
        self.join_not_before_ms = now + min(self.initial_delay_ms, timeout) if initial else now
        self._maybe_complete_join(now)

    def _reset_assignment(self, err: Err) -> None:
        self.assigned = False
        for m in self.members.values():
            m.assignment = b""
            if m.sync is not None:
                m.sync.fail(err)
                m.sync = None

    def _maybe_complete_join(self, now: int) -> None:
        if (self.state is GroupState.PREPARING and now >= self.join_not_before_ms and not self.pending
                and all(m.join is not None for m in self.members.values())):
            self._complete_join(now)

    def _complete_join(self, now: int) -> None:
        for m in [m for m in self.members.values() if m.join is None]:
            self._remove(m)  # did not rejoin within the rebalance timeout
        self.pending.clear()  # their ids are void; such a member starts again as new
        self.generation += 1
        if not self.members:
            self.state, self.protocol, self.leader = GroupState.EMPTY, None, None
            self.write_wanted = True
            return
        self.protocol = self._select_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = GroupState.COMPLETING
        for m in self.members.values():
            assert m.join is not None
            m.join.succeed(**self._join_fields(m))
            m.join = None
            m.heartbeat_deadline_ms = now + m.session_timeout_ms

    def _select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        candidates = self._candidates()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda n: votes[n])

    def _join_fields(self, m: Member) -> dict[str, Any]:
        members = [{"member_id": x.member_id, "metadata": x.metadata(self.protocol)}
                   for x in self.members.values()] if m.member_id == self.leader else []
        return {"generation_id": self.generation, "protocol_name": self.protocol, "leader": self.leader or "",
                "member_id": m.member_id, "members": members}

    # --- SyncGroup ---------------------------------------------------------------------------------
    def sync(self, now: int, member_id: str, generation: int, assignments: dict[str, bytes]) -> Waiter:
        w = Waiter()
        m = self.members.get(member_id)
        if m is None:
            return w.fail(Err.UNKNOWN_MEMBER_ID)
        if generation != self.generation:
            return w.fail(Err.ILLEGAL_GENERATION)
        if self.state is GroupState.PREPARING:
            return w.fail(Err.REBALANCE_IN_PROGRESS)
        m.heartbeat_deadline_ms = now + m.session_timeout_ms
        if self.state is GroupState.STABLE:
            w.succeed(assignment=m.assignment)
            return w
        if m.sync is not None:
            m.sync.fail(Err.REBALANCE_IN_PROGRESS)
        m.sync = w
        if member_id == self.leader and not self.assigned:
            for x in self.members.values():
                x.assignment = assignments.get(x.member_id, b"")
            self.assigned = True
            self.write_wanted = True  # answered once the group record is written (`written`)
        return w

    def written(self, now: int, generation: int, err: Err) -> None:
        """The group record of `generation` is committed (err NONE) or could not be."""
        if generation != self.generation or self.state is not GroupState.COMPLETING or not self.assigned:
            return
        if err != Err.NONE:
            self._reset_assignment(err)
            self._prepare(now)
            return
        self.state, self.assigned = GroupState.STABLE, False
        for m in self.members.values():
            if m.sync is not None:
                m.sync.succeed(assignment=m.assignment)
                m.sync = None

    # --- Heartbeat, LeaveGroup, timers --------------------------------------------------------------
    def heartbeat(self, now: int, member_id: str, generation: int) -> Err:
        m = self.members.get(member_id)
        if m is None:
            return Err.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return Err.ILLEGAL_GENERATION
        m.heartbeat_deadline_ms = now + m.session_timeout_ms
        return Err.REBALANCE_IN_PROGRESS if self.state is GroupState.PREPARING else Err.NONE

    def leave(self, now: int, member_id: str) -> Err:
        if self.pending.pop(member_id, None) is not None:
            self._maybe_complete_join(now)
            return Err.NONE
        m = self.members.get(member_id)
        if m is None:
            return Err.UNKNOWN_MEMBER_ID
        self._remove(m)
        self._member_gone(now)
        return Err.NONE

    def _remove(self, m: Member) -> None:
        del self.members[m.member_id]
        if m.join is not None:
            m.join.fail(Err.UNKNOWN_MEMBER_ID, member_id=m.member_id)
        if m.sync is not None:
            m.sync.fail(Err.UNKNOWN_MEMBER_ID)
        if self.leader == m.member_id:
            self.leader = next(iter(self.members), None)

    def _member_gone(self, now: int) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING):
            self._prepare(now)
        else:
            self._maybe_complete_join(now)

    def tick(self, now: int) -> None:
        """Expire members and member ids past their session timeout; end a rebalance at its timeout."""
        for mid, deadline in list(self.pending.items()):
            if now >= deadline:
                del self.pending[mid]
        for m in list(self.members.values()):
            waiting = (self.state is GroupState.PREPARING and m.join is not None) or \
                      (self.state is GroupState.COMPLETING and m.sync is not None)
            if now >= m.heartbeat_deadline_ms and not waiting:
                self._remove(m)
                self._member_gone(now)
        if self.state is GroupState.PREPARING and now >= max(self.rebalance_deadline_ms, self.join_not_before_ms):
            self._complete_join(now)
        else:
            self._maybe_complete_join(now)

    # --- OffsetCommit --------------------------------------------------------------------------------
    def may_commit(self, now: int, member_id: str, generation: int) -> Err:
        """Kafka's rule: a group with no members takes commits without a generation (assign()-style
        consumers); otherwise only a member of the current generation commits, not mid-assignment.
        Member and generation are checked first: during CompletingRebalance a member of the previous
        generation gets ILLEGAL_GENERATION (librdkafka's 0113 v_commit_during_rebalance expects it),
        one of the new generation REBALANCE_IN_PROGRESS."""
        if generation < 0 and self.state is GroupState.EMPTY:
            return Err.NONE
        m = self.members.get(member_id)
        if m is None:
            return Err.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return Err.ILLEGAL_GENERATION  # before the state, as Kafka: a member of an older generation learns so
        if self.state is GroupState.COMPLETING:
            return Err.REBALANCE_IN_PROGRESS
        m.heartbeat_deadline_ms = now + m.session_timeout_ms
        return Err.NONE

    # --- the group record ----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {"generation": self.generation, "protocol_type": self.protocol_type, "protocol": self.protocol,
                "leader": self.leader,
                "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                             "session_timeout_ms": m.session_timeout_ms,
                             "rebalance_timeout_ms": m.rebalance_timeout_ms,
                             "subscription": m.metadata(self.protocol).hex(), "assignment": m.assignment.hex()}
                            for m in self.members.values()]}

    @classmethod
    def restore(cls, group_id: str, snap: dict[str, Any], now: int, initial_delay_ms: int) -> Group:
        """A loaded group: Stable with its members (their sessions start now), or Empty."""
        g = cls(group_id, initial_delay_ms, generation=int(snap["generation"]), protocol_type=snap["protocol_type"],
                protocol=snap["protocol"], leader=snap["leader"])
        for d in snap["members"]:
            g.members[d["member_id"]] = Member(
                d["member_id"], d["client_id"], d["client_host"], int(d["session_timeout_ms"]),
                int(d["rebalance_timeout_ms"]), ((g.protocol or "", bytes.fromhex(d["subscription"])),),
                heartbeat_deadline_ms=now + int(d["session_timeout_ms"]), assignment=bytes.fromhex(d["assignment"]))
        g.state = GroupState.STABLE if g.members else GroupState.EMPTY
        if not g.members:
            g.protocol_type = g.protocol = g.leader = None
        return g
