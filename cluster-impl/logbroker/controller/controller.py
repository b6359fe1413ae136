"""The active controller: reacts to broker and topic changes and to AlterIsr, writes ZooKeeper, and
tells brokers what to do (seed 003 A, B, D, E; KIP-497 for ISR changes).

Every ZooKeeper call runs in a worker thread (kazoo is blocking) and every decision runs on the
broker's event loop, one at a time (`_lock`), so the controller's view is never interleaved.
Partition state writes are conditional on the znode version; a lost race means a newer controller
exists, and this one steps down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from logbroker.controller.decisions import elect_leader
from logbroker.coord.zk import PartitionState, StaleVersion, ZkStore
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)

Send = Callable[[int, dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass
class PartitionInfo:
    replicas: list[int]
    state: PartitionState
    version: int


@dataclass
class ControllerState:
    epoch: int
    brokers: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # id -> host, port, broker epoch
    partitions: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)


class Controller:
    def __init__(self, broker_id: int, zk: ZkStore, send: Send, *, unclean: bool) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.send = send
        self.unclean = unclean
        self.state: ControllerState | None = None
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def active(self) -> bool:
        return self.state is not None

    async def _zk(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _watch(self, coro: Callable[[], Awaitable[None]]) -> Callable[[Any], None]:
        loop = asyncio.get_running_loop()

        def fire(_event: Any) -> None:
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(coro()))

        return fire

    # --- failover (D) ----------------------------------------------------------------------------
    async def become_active(self, epoch: int) -> None:
        """Seed 003 D: read everything, fix leaderless partitions, send LeaderAndIsr with INIT to all."""
        async with self._lock:
            self.state = ControllerState(epoch)
            log.info("broker %d is controller with epoch %d", self.broker_id, epoch)
            self.state.brokers = await self._zk(self.zk.live_brokers, self._watch(self.on_brokers_changed))
            topics = await self._zk(self.zk.topics, self._watch(self.on_topics_changed))
            for t in topics:
                await self._load_topic(t)
            await self._elect_where_needed()
            await self._broadcast(init=True)

    def resign(self) -> None:
        if self.state is not None:
            log.info("broker %d resigns as controller", self.broker_id)
        self.state = None

    async def _load_topic(self, topic: str) -> None:
        assert self.state is not None
        assignment = await self._zk(self.zk.assignment, topic)
        for p, replicas in assignment.items():
            if (topic, p) in self.state.partitions:
                continue
            got = await self._zk(self.zk.partition_state, topic, p)
            if got is None:  # new partition (B, H): first live replica leads, live replicas form the ISR
                live = [r for r in replicas if r in self.state.brokers]
                leader = live[0] if live else -1
                st = PartitionState(leader, 0, tuple(live) or tuple(replicas), self.state.epoch)
                try:
                    version = await self._zk(self.zk.write_partition_state, topic, p, st, None)
                except StaleVersion:
                    got = await self._zk(self.zk.partition_state, topic, p)
                    assert got is not None
                    st, version = got
                self.state.partitions[(topic, p)] = PartitionInfo(replicas, st, version)
            else:
                self.state.partitions[(topic, p)] = PartitionInfo(replicas, got[0], got[1])

    async def _elect_where_needed(self) -> list[tuple[str, int]]:
        """Seed 003 A: partitions whose leader is gone get a new one; dead replicas leave the ISR."""
        assert self.state is not None
        live = set(self.state.brokers)
        changed = []
        for (topic, p), info in self.state.partitions.items():
            st = info.state
            if st.leader in live and all(r in live for r in st.isr):
                continue
            if st.leader in live:  # only followers died: shrink the ISR, same leader epoch + 1
                new = PartitionState(st.leader, st.leader_epoch + 1, tuple(r for r in st.isr if r in live), self.state.epoch)
            else:
                e = elect_leader(info.replicas, st.isr, live, unclean_allowed=self.unclean)
                if e.leader == -1 and st.leader == -1:
                    continue
                if e.unclean:
                    log.warning("%s-%d: unclean leader election of %d", topic, p, e.leader)
                new = PartitionState(e.leader, st.leader_epoch + 1, e.isr, self.state.epoch)
            if await self._write(topic, p, info, new):
                changed.append((topic, p))
        return changed

    async def _write(self, topic: str, p: int, info: PartitionInfo, new: PartitionState) -> bool:
        assert self.state is not None
        try:
            info.version = await self._zk(self.zk.write_partition_state, topic, p, new, info.version)
            info.state = new
            return True
        except StaleVersion:
            log.warning("%s-%d: partition state changed under us; a newer controller exists", topic, p)
            self.resign()
            return False

    # --- messages to brokers -------------------------------------------------------------------
    def _partition_msg(self, topic: str, p: int, info: PartitionInfo) -> dict[str, Any]:
        st = info.state
        return {"topic": topic, "partition": p, "leader": st.leader, "leader_epoch": st.leader_epoch,
                "isr": list(st.isr), "replicas": info.replicas, "zk_version": info.version}

    def _brokers_msg(self) -> list[dict[str, Any]]:
        assert self.state is not None
        return [{"id": b, "host": h, "port": port, "epoch": e} for b, (h, port, e) in sorted(self.state.brokers.items())]

    async def _broadcast(self, *, init: bool = False, only: list[tuple[str, int]] | None = None,
                         to: list[int] | None = None) -> None:
        """LeaderAndIsr to each replica of the partitions, then UpdateMetadata to every live broker."""
        if self.state is None:
            return
        st = self.state
        keys = list(st.partitions) if only is None else only
        targets = sorted(st.brokers) if to is None else to
        sends = []
        for b in targets:
            parts = [self._partition_msg(t, p, st.partitions[(t, p)]) for t, p in keys
                     if b in st.partitions[(t, p)].replicas]
            if parts:
                sends.append(self.send(b, {"type": "leader_and_isr", "controller_id": self.broker_id,
                                           "controller_epoch": st.epoch, "init": init, "partitions": parts,
                                           "brokers": self._brokers_msg()}))
        await asyncio.gather(*sends, return_exceptions=True)
        await self._update_metadata()

    async def _update_metadata(self) -> None:
        if self.state is None:
            return
        st = self.state
        msg = {"type": "update_metadata", "controller_id": self.broker_id, "controller_epoch": st.epoch,
               "brokers": self._brokers_msg(),
               "partitions": [self._partition_msg(t, p, i) for (t, p), i in st.partitions.items()]}
        await asyncio.gather(*(self.send(b, msg) for b in sorted(st.brokers)), return_exceptions=True)

    # --- events --------------------------------------------------------------------------------
    async def on_brokers_changed(self) -> None:
        """Seed 003 A (failure) and E (start-up)."""
        async with self._lock:
            if self.state is None:
                return
            before = set(self.state.brokers)
            self.state.brokers = await self._zk(self.zk.live_brokers, self._watch(self.on_brokers_changed))
            now = set(self.state.brokers)
            if before != now:
                log.info("controller: brokers %s -> %s", sorted(before), sorted(now))
            changed = await self._elect_where_needed()
            started = sorted(now - before)
            if changed:
                await self._broadcast(only=changed)
            if started:  # a (re)started broker learns its partitions: it follows, truncates, catches up
                await self._broadcast(to=started)
            elif not changed:
                await self._update_metadata()

    async def on_topics_changed(self) -> None:
        """Seed 003 B: a new /brokers/topics/<t> gets partition states and leaders."""
        async with self._lock:
            if self.state is None:
                return
            topics = await self._zk(self.zk.topics, self._watch(self.on_topics_changed))
            new = [t for t in topics if not any(k[0] == t for k in self.state.partitions)]
            for t in new:
                await self._load_topic(t)
            keys = [k for k in self.state.partitions if k[0] in new]
            if keys:
                await self._broadcast(only=keys)

    async def alter_isr(self, req: dict[str, Any]) -> dict[str, Any]:
        """KIP-497: only the controller writes the ISR; the leader's request is checked against the
        broker epoch, the leader epoch and the znode version it was based on."""
        async with self._lock:
            if self.state is None:
                return {"error": int(Err.NOT_CONTROLLER)}
            key = (req["topic"], int(req["partition"]))
            info = self.state.partitions.get(key)
            if info is None:
                return {"error": int(Err.UNKNOWN_TOPIC_OR_PARTITION)}
            leader = int(req["broker_id"])
            if self.state.brokers.get(leader, (None, None, None))[2] != req["broker_epoch"]:
                return {"error": int(Err.STALE_BROKER_EPOCH)}
            if info.state.leader != leader or info.state.leader_epoch != req["leader_epoch"]:
                return {"error": int(Err.FENCED_LEADER_EPOCH)}
            if info.version != req["zk_version"]:
                return {"error": int(Err.INVALID_UPDATE_VERSION), **self._partition_msg(*key, info)}
            isr = tuple(int(r) for r in req["isr"] if int(r) in self.state.brokers or int(r) == leader)
            if leader not in isr:
                return {"error": int(Err.INVALID_REQUEST)}
            new = PartitionState(leader, info.state.leader_epoch, isr, self.state.epoch)
            if not await self._write(key[0], key[1], info, new):
                return {"error": int(Err.NOT_CONTROLLER)}
            log.info("%s-%d: ISR %s -> %s (AlterIsr from %d)", key[0], key[1], list(req.get("old_isr", [])),
                     list(isr), leader)
        await self._update_metadata()
        return {"error": 0, **self._partition_msg(*key, info)}
