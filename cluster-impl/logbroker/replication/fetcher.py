"""Replica fetchers: one asyncio task per leader broker this broker follows partitions from.

The decisions (which partitions to fetch, truncate or back off; what goes into an incremental
fetch session request) are in `fetch_state.py`; this module owns the two connections to the
leader (one for Fetch long-polls, one for OffsetForLeaderEpoch, so a truncation never queues
behind a long-poll), writes fetched batches into the logs, and moves follower high watermarks.

A fetcher never dies: an unexpected error is logged and every partition starts over from
truncation after a second — a follower that silently stopped fetching would drop out of the ISR
for good and nobody would know why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from logbroker.core.broker import BrokerCore
from logbroker.core.partition import Partition, Role, TopicPartition
from logbroker.log.batch import CorruptBatch
from logbroker.net import TCP, Network
from logbroker.probes import probe
from logbroker.protocol.errors import Err
from logbroker.replication.fetch_state import FetcherState, FetchPlan, Key
from logbroker.replication.rpc import PeerConnection
from logbroker.replication.truncation import TruncationSearch

log = logging.getLogger(__name__)
_BELOW_HW = probe("follower-truncates-below-hw")
_UNCOMMITTED_TAIL = probe("follower-truncates-uncommitted-tail")
_TRUNCATION_FAILED = probe("truncation-request-failed")
_SESSION_REFUSED = probe("fetch-session-refused")
_PARTITION_ERROR = probe("follower-fetch-partition-error")

Endpoint = Callable[[int], "tuple[str, int] | None"]


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    broker_id: int
    wait_ms: int = 200  # replica.fetch.wait.max.ms
    max_bytes: int = 10 << 20  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1 << 20  # replica.fetch.max.bytes
    backoff_ms: int = 100
    truncate_to_hw: bool = False  # the pre-KIP-101 bug switch


def fetch_request(s: FetcherSettings, plan: FetchPlan) -> dict[str, Any]:
    topics: dict[str, list[dict[str, int]]] = {}
    for (topic, index), pos in plan.send.items():
        topics.setdefault(topic, []).append({
            "partition": index, "current_leader_epoch": pos.leader_epoch, "fetch_offset": pos.fetch_offset,
            "log_start_offset": -1, "partition_max_bytes": pos.max_bytes})
    forgotten: dict[str, list[int]] = {}
    for topic, index in plan.forget:
        forgotten.setdefault(topic, []).append(index)
    return {"replica_id": s.broker_id, "max_wait_ms": s.wait_ms, "min_bytes": 1, "max_bytes": s.max_bytes,
            "isolation_level": 0, "session_id": plan.session_id, "session_epoch": plan.session_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
            "rack_id": ""}


class ReplicaFetcher:
    def __init__(self, leader: int, core: BrokerCore, endpoint: Endpoint, settings: FetcherSettings,
                 net: Network = TCP) -> None:
        self.leader = leader
        self.net = net
        self.core = core
        self.endpoint = endpoint
        self.settings = settings
        self.state = FetcherState(settings.backoff_ms, settings.partition_max_bytes)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conns: dict[str, PeerConnection] = {}
        self.requests = 0  # Fetch requests sent (tests and benchmarks read it)

    # --- membership ----------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def add(self, p: Partition, epoch: int) -> None:
        key = (p.tp.topic, p.tp.partition)
        self.state.add(key, epoch, p.leo)
        if self.settings.truncate_to_hw:
            # Before KIP-101 the cut was part of becoming a follower (makeFollowers), with no round trip
            # to the leader. Done in the loop instead, it waited behind this fetcher's in-flight fetch -
            # seconds when the leader is cut off - and a replica elected leader meanwhile never cut at all.
            log.info("%s: truncating to HW %d (bug truncate-to-hw)", p.tp, p.hw)
            self._cut(key, epoch, p.hw)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.state.remove((tp.topic, tp.partition))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    # --- plumbing ------------------------------------------------------------------------------
    def _now(self) -> int:
        return self.core.clock.monotonic_ms()

    def _conn(self, purpose: str) -> PeerConnection:
        ep = self.endpoint(self.leader)
        if ep is None:
            raise ConnectionError(f"no endpoint known for broker {self.leader}")
        c = self._conns.get(purpose)
        if c is None or (c.host, c.port) != ep:
            if c is not None:
                c.close()
            c = self._conns[purpose] = PeerConnection(*ep, self.net)
        return c

    def _partition(self, key: Key, epoch: int) -> Partition | None:
        """The local replica, if it still follows this leader at `epoch`."""
        p = self.core.partitions.get(TopicPartition(*key))
        if p is None or p.role is not Role.FOLLOWER or p.leader_id != self.leader or p.leader_epoch != epoch:
            return None
        return p

    # --- the loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher for leader %d failed; its partitions start over from truncation", self.leader)
                self.state.failed(self._now(), restart=True)
                for c in self._conns.values():
                    c.close()
                await asyncio.sleep(1.0)

    async def _step(self) -> None:
        now = self._now()
        self.state.wake_delayed(now)
        if self.state.to_truncate():
            await self._truncate()
            return
        plan = self.state.plan()
        if plan is None:
            self._wake.clear()
            wake = self.state.next_wake_ms()
            timeout = None if wake is None else max(0, wake - now) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            return
        try:
            self.requests += 1
            resp = await self._conn("fetch").fetch(fetch_request(self.settings, plan),
                                                   timeout=self.settings.wait_ms / 1000 + 5)
        except ConnectionError as e:
            log.debug("fetch from %d failed: %s", self.leader, e)
            self.state.failed(self._now())
            return
        self._apply(plan, resp)

    def _apply(self, plan: FetchPlan, resp: Any) -> None:
        now = self._now()
        self.state.session.on_response(resp.error_code, resp.session_id)
        if resp.error_code:
            _SESSION_REFUSED()
            log.info("fetch session with %d: %s; starting a new one", self.leader, Err(resp.error_code).name)
            return
        for t in resp.responses:
            for pr in t.partitions:
                key = (t.topic, pr.partition_index)
                sent = plan.positions.get(key)
                if sent is None or not self.state.still_fetching(key, sent):
                    continue  # moved on since the request left (truncated, re-added, removed)
                p = self._partition(key, sent.leader_epoch)
                if p is None:
                    continue
                if pr.error_code:
                    _PARTITION_ERROR()
                    self.state.partition_error(key, pr.error_code, now)
                    continue
                if pr.records:
                    try:
                        p.append_as_follower(pr.records)
                    except CorruptBatch as e:
                        log.warning("%s: bad fetch data from %d: %s", p.tp, self.leader, e)
                        self.state.partition_error(key, Err.CORRUPT_MESSAGE, now)
                        continue
                p.hw = max(p.hw, min(int(pr.high_watermark), p.leo))
                if pr.log_start_offset > p.log.log_start_offset:  # DeleteRecords on the leader
                    p.log.advance_start(int(pr.log_start_offset))
                self.state.advanced(key, p.leo)

    # --- truncation (KIP-101/279), all waiting partitions in one request per round -------------------
    async def _truncate(self) -> None:
        todo = self.state.to_truncate()
        searches: dict[Key, TruncationSearch] = {}
        for key, epoch in todo.items():
            p = self._partition(key, epoch)
            if p is None:
                self.state.remove(key)  # the manager has moved it on; never spin on it
                continue
            if self.settings.truncate_to_hw:
                log.info("%s: truncating to HW %d (bug truncate-to-hw)", p.tp, p.hw)
                self._cut(key, epoch, p.hw)
            else:
                searches[key] = TruncationSearch(p.log.epochs, p.leo, p.hw)
        while True:
            questions = {k: q for k, s in searches.items() if (q := s.question()) is not None}
            if not questions:
                break
            body = {"type": "offsets_for_leader_epoch", "partitions": [
                {"topic": k[0], "partition": k[1], "leader_epoch": q, "current_leader_epoch": todo[k]}
                for k, q in questions.items()]}
            try:
                reply = await self._conn("control").call(body)
            except ConnectionError as e:
                log.info("OffsetForLeaderEpoch to %d failed: %s", self.leader, e)
                reply = {"error": -1}
            answers = {(a["topic"], int(a["partition"])): a for a in reply.get("partitions", [])}
            now = self._now()
            for k in questions:
                a = answers.get(k)
                if a is None or a.get("error"):
                    _TRUNCATION_FAILED()
                    self.state.truncation_failed(k, todo[k], now)
                    del searches[k]
                else:
                    searches[k].answer(int(a["leader_epoch"]), int(a["end_offset"]))
        for k, s in searches.items():
            assert s.result is not None
            self._cut(k, todo[k], s.result)

    def _cut(self, key: Key, epoch: int, cut: int) -> None:
        p = self._partition(key, epoch)
        if p is None:
            return
        if cut < p.leo:
            (_BELOW_HW if cut < p.hw else _UNCOMMITTED_TAIL)()
            log.info("%s: truncating LEO %d -> %d before following %d", p.tp, p.leo, cut, self.leader)
            p.truncate_to(cut)
        p.hw = min(p.hw, p.leo)
        self.state.truncated(key, epoch, p.leo)


class FetcherPool:
    """Which fetcher follows which partition: at most one per partition, one per leader broker."""

    def __init__(self, core: BrokerCore, endpoint: Endpoint, settings: FetcherSettings, net: Network = TCP) -> None:
        self.core, self.endpoint, self.settings, self.net = core, endpoint, settings, net
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.leader_of: dict[TopicPartition, int] = {}

    def follow(self, p: Partition, leader: int, epoch: int) -> None:
        self.unfollow(p.tp)
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = ReplicaFetcher(leader, self.core, self.endpoint, self.settings, self.net)
            f.start()
        f.add(p, epoch)
        self.leader_of[p.tp] = leader

    def unfollow(self, tp: TopicPartition) -> None:
        leader = self.leader_of.pop(tp, None)
        f = self.fetchers.get(leader) if leader is not None else None
        if f is None:
            return
        f.remove(tp)
        if not len(f.state):
            f.stop()
            del self.fetchers[f.leader]

    def stop(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()
        self.leader_of.clear()
