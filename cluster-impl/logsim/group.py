"""`SimGroupConsumer`: a consumer in a group, as librdkafka's is for the queue workload's subscribe
mode, over the simulated network and against the production group coordinator.

Model of the client (what the history can tell apart):
- The coordinator is found with FindCoordinator and looked up again after NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE, a lost connection or a timeout.
- Joining is the eager protocol with the range assignor (`partition.assignment.strategy=range`):
  JoinGroup (v2: the coordinator names a new member), and SyncGroup, where the leader hands each
  member a contiguous range of the topic's partitions by sorted member id (Kafka's RangeAssignor).
  Subscriptions and assignments are the members' own bytes — the coordinator never reads them —
  here a JSON list of partitions.
- A heartbeat every `heartbeat_s`; REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID
  (from a heartbeat or a commit) means joining again. The consumer does it at its next poll, as
  librdkafka serves rebalances from poll: it revokes everything it holds and is assigned anew, and
  the poll's rebalance log says so (`{"revoked": [...], "assigned": [...]}`, one entry a rebalance).
- An assigned partition is read from the group's committed offset, or from the log start when none
  is committed (`auto.offset.reset=earliest`); fetching is `SimKafkaClient`'s.
- Commits are synchronous OffsetCommit with the member's generation; a refused or unanswered one is
  reported as such. Leaving is LeaveGroup, best effort.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from logbroker.protocol.apis import make_message

from logsim.client import ClientTimeout, SimKafkaClient

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, OFFSET_COMMIT, OFFSET_FETCH = 10, 11, 12, 13, 14, 8, 9
#: errors that mean this member must join the group again
REJOIN = {22, 25, 27}  # illegal generation, unknown member id, rebalance in progress
#: errors that mean the coordinator must be looked up again
RECOORDINATE = {14, 15, 16}  # coordinator loading, coordinator not available, not coordinator


class GroupError(Exception):
    """The group could not be joined now (the poll reads nothing and tries again later)."""


def range_assign(members: list[str], partitions: int) -> dict[str, list[int]]:
    """Kafka's RangeAssignor for one topic: sorted members, contiguous ranges, the first ones one more."""
    out: dict[str, list[int]] = {}
    n, extra = divmod(partitions, max(1, len(members)))
    start = 0
    for i, m in enumerate(sorted(members)):
        size = n + (1 if i < extra else 0)
        out[m] = list(range(start, start + size))
        start += size
    return out


class SimGroupConsumer:
    def __init__(self, kafka: SimKafkaClient, group: str, partitions: int, *, session_timeout_s: float = 6.0,
                 rebalance_timeout_s: float = 15.0, heartbeat_s: float = 1.0) -> None:
        self.k, self.group, self.partitions = kafka, group, partitions
        self.session_timeout_s, self.rebalance_timeout_s, self.heartbeat_s = (session_timeout_s, rebalance_timeout_s,
                                                                               heartbeat_s)
        self.coordinator: str | None = None
        self.member_id = ""
        self.generation = -1
        self.assigned: list[int] = []
        self.must_join = True
        self.rebalances: list[dict[str, list[int]]] = []
        self._beats: asyncio.Task[None] | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.k.loop

    async def _call(self, api: int, version: int, body: dict[str, Any], cls: Any, timeout: float | None = None
                    ) -> dict[str, Any]:
        """One group request to the coordinator (found first); GroupError when there is none or it does
        not answer (and it is looked up again next time)."""
        node = self.coordinator or await self._find()
        req = make_message(cls, version, body)
        req.with_header(correlation_id=0, client_id=f"sim-{self.group}")
        try:
            got: dict[str, Any] = await self.k.call(node, api, version, req, timeout)
        except (ConnectionError, ClientTimeout) as e:
            self.coordinator = None
            raise GroupError(str(e)) from None
        if int(got.get("error_code", 0)) in RECOORDINATE:
            self.coordinator = None
        return got

    async def _find(self) -> str:
        req = make_message(FindCoordinatorRequest, 1, {"key": self.group, "key_type": 0})
        for node in [self.k.bootstrap, *sorted(set(self.k.nodes) - {self.k.bootstrap})]:
            try:
                body = await self.k.call(node, FIND_COORDINATOR, 1, req)
            except (ConnectionError, ClientTimeout):
                continue
            if int(body["error_code"]) == 0 and body["host"]:
                self.coordinator = str(body["host"])
                return self.coordinator
        raise GroupError("no group coordinator found")

    # --- membership --------------------------------------------------------------------------------
    async def _join(self) -> None:
        """JoinGroup then SyncGroup; the assignment, and each partition's starting position."""
        meta = json.dumps({"topic": self.k.topic}).encode()
        got = await self._call(JOIN, 2, {
            "group_id": self.group, "session_timeout_ms": int(self.session_timeout_s * 1000),
            "rebalance_timeout_ms": int(self.rebalance_timeout_s * 1000), "member_id": self.member_id,
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": meta}]},
            JoinGroupRequest, self.rebalance_timeout_s + 5.0)
        err = int(got["error_code"])
        if err == 25:  # the coordinator forgot us: join as a new member
            self.member_id = ""
        if err:
            raise GroupError(f"JoinGroup: error {err}")
        self.member_id, self.generation = str(got["member_id"]), int(got["generation_id"])
        plan = range_assign([str(m["member_id"]) for m in got["members"]], self.partitions) \
            if got["leader"] == self.member_id else {}
        synced = await self._call(SYNC, 1, {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "assignments": [{"member_id": m, "assignment": json.dumps(keys).encode()} for m, keys in plan.items()]},
            SyncGroupRequest, self.rebalance_timeout_s + 5.0)
        if int(synced["error_code"]):
            raise GroupError(f"SyncGroup: error {synced['error_code']}")
        raw = bytes(synced["assignment"] or b"")
        self.assigned = sorted(json.loads(raw)) if raw else []
        committed = await self.committed(self.assigned)
        self.k.positions = {k: max(0, committed.get(k, 0)) for k in self.assigned}
        self.k.buffered = {}
        self.must_join = False
        if self._beats is None or self._beats.done():
            self._beats = asyncio.ensure_future(self._heartbeats())

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            if self.must_join or not self.member_id:
                continue
            try:
                got = await self._call(HEARTBEAT, 1, {"group_id": self.group, "generation_id": self.generation,
                                                       "member_id": self.member_id}, HeartbeatRequest)
            except GroupError:
                continue
            if int(got["error_code"]) in REJOIN:
                self.must_join = True

    async def rejoin_if_asked(self) -> None:
        """At a poll: if the group rebalances, revoke everything (eager) and join again; each rebalance
        goes into `rebalances`."""
        if not self.must_join:
            return
        entry: dict[str, list[int]] = {"revoked": list(self.assigned), "assigned": []}
        if self.assigned:
            self.rebalances.append(entry)
        self.assigned, self.k.positions, self.k.buffered = [], {}, {}
        try:
            await self._join()
        except GroupError:
            return  # not a member now; the next poll tries again
        if self.rebalances and self.rebalances[-1] is entry:
            entry["assigned"] = list(self.assigned)
        else:
            self.rebalances.append({"revoked": [], "assigned": list(self.assigned)})

    async def leave(self) -> list[dict[str, list[int]]]:
        """LeaveGroup (best effort); the revocation of what was held."""
        if self._beats is not None:
            self._beats.cancel()
            self._beats = None
        gone = [{"revoked": list(self.assigned), "assigned": []}] if self.assigned else []
        if self.member_id:
            with contextlib.suppress(GroupError):
                await self._call(LEAVE, 1, {"group_id": self.group, "member_id": self.member_id}, LeaveGroupRequest)
        self.assigned, self.member_id, self.generation, self.must_join = [], "", -1, True
        self.k.positions, self.k.buffered = {}, {}
        return gone

    # --- offsets -----------------------------------------------------------------------------------
    async def commit(self, offsets: dict[int, int]) -> tuple[dict[int, int], str | None]:
        """Commit `offsets` (key -> next offset): the acknowledged ones, and the error of the others."""
        if not offsets:
            return {}, None
        try:
            got = await self._call(OFFSET_COMMIT, 2, {
                "group_id": self.group, "generation_id_or_member_epoch": self.generation,
                "member_id": self.member_id, "retention_time_ms": -1,
                "topics": [{"name": self.k.topic, "partitions": [
                    {"partition_index": k, "committed_offset": o, "committed_metadata": ""}
                    for k, o in sorted(offsets.items())]}]}, OffsetCommitRequest)
        except GroupError as e:
            return {}, str(e)
        acked, errors = {}, []
        for t in got["topics"]:
            for p in t["partitions"]:
                k, err = int(p["partition_index"]), int(p["error_code"])
                if err == 0:
                    acked[k] = offsets[k]
                else:
                    errors.append(f"{k}: error {err}")
                    if err in REJOIN:
                        self.must_join = True
        return acked, "; ".join(errors) or None

    async def committed(self, keys: list[int], timeout: float | None = None) -> dict[int, int]:
        """The group's committed offsets of `keys` ({} for keys with none, or when not answered)."""
        if not keys:
            return {}
        try:
            got = await self._call(OFFSET_FETCH, 1, {"group_id": self.group, "topics": [
                {"name": self.k.topic, "partition_indexes": sorted(keys)}]}, OffsetFetchRequest, timeout)
        except GroupError:
            return {}
        return {int(p["partition_index"]): int(p["committed_offset"]) for t in got["topics"] for p in t["partitions"]
                if int(p["error_code"]) == 0 and int(p["committed_offset"]) >= 0}
