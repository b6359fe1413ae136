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

Static members (KIP-345, `group.instance.id`, JoinGroup v5+) keep their place across restarts:
- a known instance joining with no member id gets a new id that replaces the old one (the old id is
  fenced: its waiting answers and later requests get FENCED_INSTANCE_ID). In a Stable group whose
  protocol would stay the same, nothing else happens: the new id is written in the group record and
  the member is answered with the current generation and the old leader id (so it does not assign),
  then gets its current assignment from SyncGroup. Otherwise the group rebalances;
- a rebalance does not drop a static member that has not rejoined (only its session timeout does);
  if no member at all rejoined, the rebalance waits another rebalance timeout;
- LeaveGroup may name an instance instead of a member id (administrative removal).

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
    instance_id: str | None = None  # group.instance.id of a static member (JoinGroup v5+)


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
    instance_id: str | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return dict(self.protocols).get(protocol or "", b"")


@dataclass(frozen=True, slots=True)
class Replaced:
    """A static member's id replaced in a Stable group, waiting for the group record that persists it;
    what to put back if that write fails."""

    old_member_id: str
    leader: str | None  # the leader before: the JoinGroup answer names it
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    waiter: Waiter


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
    static: dict[str, str] = field(default_factory=dict)  # group.instance.id → its current member id
    replacing: dict[str, Replaced] = field(default_factory=dict)  # new member id → its replacement
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
            if a.instance_id is not None:  # static members never get MEMBER_ID_REQUIRED
                old = self.static.get(a.instance_id)
                if old is not None:
                    self._replace_static(now, old, mid, a, w)
                else:
                    self._add(now, mid, a, w)
                return w
            if a.require_known_member_id:
                self.pending[mid] = now + a.session_timeout_ms
                return w.fail(Err.MEMBER_ID_REQUIRED, member_id=mid)
            self._add(now, mid, a, w)
            return w
        if self.pending.pop(a.member_id, None) is not None:
            self._add(now, a.member_id, a, w)
            return w
        err = self._check_member(a.member_id, a.instance_id)
        if err != Err.NONE:
            return w.fail(err, member_id=a.member_id)
        m = self.members[a.member_id]
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

    def _check_member(self, member_id: str, instance_id: str | None) -> Err:
        """Kafka's validateCurrentMember: a static member's id must be its instance's current one."""
        if instance_id is not None:
            current = self.static.get(instance_id)
            if current is None:
                return Err.UNKNOWN_MEMBER_ID
            return Err.NONE if current == member_id else Err.FENCED_INSTANCE_ID
        return Err.NONE if member_id in self.members else Err.UNKNOWN_MEMBER_ID

    def _replace_static(self, now: int, old_id: str, new_id: str, a: JoinArgs, w: Waiter) -> None:
        """A known instance rejoined with no member id: `new_id` takes the old member's place."""
        m = self.members.pop(old_id)
        if m.join is not None:
            m.join.fail(Err.FENCED_INSTANCE_ID, member_id=old_id)
        if m.sync is not None:
            m.sync.fail(Err.FENCED_INSTANCE_ID)
        m.join = m.sync = None
        before = Replaced(old_id, self.leader, m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms, w)
        self.replacing.pop(old_id, None)
        m.member_id = new_id
        self.members[new_id] = m
        if self.leader == old_id:
            self.leader = new_id
        assert a.instance_id is not None
        self.static[a.instance_id] = new_id
        self._update(now, m, a, w)
        if self.state is GroupState.STABLE and self._select_protocol() == self.protocol:
            self.replacing[new_id] = before  # answered once the group record with new_id is written
            self.write_wanted = True
        elif self.state is GroupState.PREPARING:
            self._maybe_complete_join(now)
        else:  # Stable with a protocol change; or CompletingRebalance, where the leader may be
            # assigning to the old id
            self._prepare(now)

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
                   heartbeat_deadline_ms=now + a.session_timeout_ms, join=w, instance_id=a.instance_id)
        self.members[mid] = m
        if a.instance_id is not None:
            self.static[a.instance_id] = mid
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
        for m in [m for m in self.members.values() if m.join is None and m.instance_id is None]:
            self._remove(m)  # did not rejoin within the rebalance timeout (static members stay)
        self.pending.clear()  # their ids are void; such a member starts again as new
        joined = [m for m in self.members.values() if m.join is not None]
        if self.members and not joined:  # only absent static members: wait until they rejoin or expire
            self.rebalance_deadline_ms = now + max(m.rebalance_timeout_ms for m in self.members.values())
            return
        self.generation += 1
        if not self.members:
            self.state, self.protocol, self.leader = GroupState.EMPTY, None, None
            self.write_wanted = True
            return
        self.protocol = self._select_protocol()
        if self.leader not in self.members or self.members[self.leader].join is None:
            self.leader = joined[0].member_id
        self.state = GroupState.COMPLETING
        for m in self.members.values():
            if m.join is not None:
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
        members = [{"member_id": x.member_id, "group_instance_id": x.instance_id, "metadata": x.metadata(self.protocol)}
                   for x in self.members.values()] if m.member_id == self.leader else []
        return {"generation_id": self.generation, "protocol_name": self.protocol, "leader": self.leader or "",
                "member_id": m.member_id, "members": members}

    # --- SyncGroup ---------------------------------------------------------------------------------
    def sync(self, now: int, member_id: str, generation: int, assignments: dict[str, bytes],
             instance_id: str | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None) -> Waiter:
        """Kafka's order of checks: the member (and its instance), the generation, then the protocol
        the member believes was chosen (SyncGroup v5), then the state. A member whose session ran
        out learns UNKNOWN_MEMBER_ID (and rejoins), not that the emptied group has no protocol."""
        w = Waiter()
        err = self._check_member(member_id, instance_id)
        if err != Err.NONE:
            return w.fail(err)
        m = self.members[member_id]
        if generation != self.generation:
            return w.fail(Err.ILLEGAL_GENERATION)
        if ((protocol_type is not None and protocol_type != self.protocol_type)
                or (protocol_name is not None and protocol_name != self.protocol)):
            return w.fail(Err.INCONSISTENT_GROUP_PROTOCOL)
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

    def written(self, now: int, generation: int, err: Err, replaced: tuple[str, ...] = ()) -> None:
        """The group record of `generation` is committed (err NONE) or could not be; `replaced` are the
        static members' new ids (`replacing`) that it carried."""
        for mid in replaced:
            self._replacement_written(mid, generation, err)
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

    def _replacement_written(self, mid: str, generation: int, err: Err) -> None:
        """Answer a static member that replaced its old id in a Stable group, or put the old id back
        (as Kafka: the member gets the error and starts again) — unless the group has moved on."""
        r = self.replacing.pop(mid, None)
        m = self.members.get(mid)
        if r is None or m is None or m.join is not r.waiter:
            return
        if self.state is not GroupState.STABLE or generation != self.generation:
            return  # a rebalance started meanwhile: its end answers the member
        if err == Err.NONE:
            fields = self._join_fields(m) | {"leader": r.leader or "", "members": []}
            m.join = None
            r.waiter.succeed(**fields)
            return
        del self.members[mid]
        m.member_id, m.join = r.old_member_id, None
        m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = r.protocols, r.session_timeout_ms, \
            r.rebalance_timeout_ms
        self.members[r.old_member_id] = m
        if m.instance_id is not None:
            self.static[m.instance_id] = r.old_member_id
        self.leader = r.leader
        r.waiter.fail(err, member_id="", generation_id=self.generation, protocol_name=self.protocol,
                      leader=r.leader or "")

    # --- Heartbeat, LeaveGroup, timers --------------------------------------------------------------
    def heartbeat(self, now: int, member_id: str, generation: int, instance_id: str | None = None) -> Err:
        err = self._check_member(member_id, instance_id)
        if err != Err.NONE:
            return err
        m = self.members[member_id]
        if generation != self.generation:
            return Err.ILLEGAL_GENERATION
        m.heartbeat_deadline_ms = now + m.session_timeout_ms
        return Err.REBALANCE_IN_PROGRESS if self.state is GroupState.PREPARING else Err.NONE

    def leave(self, now: int, member_id: str, instance_id: str | None = None) -> Err:
        """A member leaves; with no member id, the static member of `instance_id` is removed (Kafka's
        administrative removal, LeaveGroup v3+)."""
        if member_id == "":
            member_id = self.static.get(instance_id, "") if instance_id is not None else ""
            instance_id = None
        elif self.pending.pop(member_id, None) is not None:
            self._maybe_complete_join(now)
            return Err.NONE
        err = self._check_member(member_id, instance_id)
        if err != Err.NONE:
            return err
        m = self.members[member_id]
        self._remove(m)
        self._member_gone(now)
        return Err.NONE

    def _remove(self, m: Member) -> None:
        del self.members[m.member_id]
        self.replacing.pop(m.member_id, None)
        if m.instance_id is not None and self.static.get(m.instance_id) == m.member_id:
            del self.static[m.instance_id]
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
    def may_commit(self, now: int, member_id: str, generation: int, instance_id: str | None = None) -> Err:
        """Kafka's rule: a group with no members takes commits without a generation (assign()-style
        consumers); otherwise only a member of the current generation commits, not mid-assignment.
        Member and generation are checked first: during CompletingRebalance a member of the previous
        generation gets ILLEGAL_GENERATION (librdkafka's 0113 v_commit_during_rebalance expects it),
        one of the new generation REBALANCE_IN_PROGRESS. A fenced static member learns so first."""
        if instance_id is not None and (err := self._check_member(member_id, instance_id)) != Err.NONE:
            return err  # a static member is always validated, even with no generation (Kafka)
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
                "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
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
                heartbeat_deadline_ms=now + int(d["session_timeout_ms"]), assignment=bytes.fromhex(d["assignment"]),
                instance_id=d.get("group_instance_id"))  # absent in records written before static members
        g.static = {m.instance_id: mid for mid, m in g.members.items() if m.instance_id is not None}
        g.state = GroupState.STABLE if g.members else GroupState.EMPTY
        if not g.members:
            g.protocol_type = g.protocol = g.leader = None
        return g
