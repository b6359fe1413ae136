"""The active controller: reacts to broker and topic changes and to AlterIsr, writes the metadata
store, and tells brokers what to do (seed 003 A, B, D, E; KIP-497 for ISR changes). Operator
requests — partition add (H), reassignment (F), leader elections — are in `operations.py` and
use the primitives here.

Every store call runs through the `offload` it is handed (a worker thread for kazoo, which blocks;
inline in a simulator) and every decision runs on the broker's event loop, one at a time (`lock`),
so the controller's view is never interleaved.
Partition state and topic writes are conditional on the znode version; a lost race means a newer
controller exists, and this one steps down.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from logbroker.controller.channels import BrokerChannels, Send
from logbroker.controller.decisions import elect_leader, next_elr
from logbroker.controller.operations import Operations
from logbroker.controller.state import ControllerSettings, ControllerState, Key, PartitionInfo
from logbroker.coord.model import PartitionState, ReplicaAssignment
from logbroker.coord.retry import until_done
from logbroker.coord.store import MetadataStore, StaleVersion, Watch
from logbroker.offload import Offload
from logbroker.probes import probe
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)
_FAILOVER = probe("controller-failover")
_RESIGNS = probe("controller-resigns-on-stale-version")
_UNCLEAN = probe("unclean-leader-election")
_ELR = probe("elr-leader-elected")
_OFFLINE_LAGGARD = probe("partition-offline-with-live-laggard")
_SOLE_ISR = probe("leader-elected-sole-isr")
_BOUNCE = probe("broker-bounce-detected")
_ALTER_STALE_BROKER = probe("alter-isr-stale-broker-epoch")
_ALTER_FENCED = probe("alter-isr-fenced-leader-epoch")
_ALTER_VERSION = probe("alter-isr-version-conflict")
_BELOW_MIN = probe("isr-below-min-insync")

__all__ = ["Controller", "ControllerSettings", "ControllerState", "Key", "PartitionInfo"]


class Controller:
    def __init__(self, broker_id: int, zk: MetadataStore, send: Send,
                 settings: ControllerSettings | None = None, *, offload: Offload) -> None:
        """`offload` runs each (blocking) store call: a worker thread in a real broker, inline in a
        simulator (`logbroker/offload.py`)."""
        self.broker_id = broker_id
        self.zk = zk
        self.offload = offload
        self.settings = settings or ControllerSettings()
        self.state: ControllerState | None = None
        self.lock = asyncio.Lock()
        self.ops = Operations(self)
        self.channels = BrokerChannels(send)
        self._metadata_seq = itertools.count(1)  # orders this controller's UpdateMetadata snapshots
        self._timers: list[asyncio.Task[None]] = []
        self._watches: dict[str, Watch] = {}

    @property
    def active(self) -> bool:
        return self.state is not None

    async def store(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.offload(fn, *args)

    def watch(self, name: str, coro: Callable[[], Awaitable[None]]) -> Watch:
        """One callable per event kind: the store keeps watchers in a set, so re-arming with the same
        callable never stacks duplicate notifications. The handler itself checks that we are still
        the controller, so a watch left over from an earlier term is harmless."""
        if name not in self._watches:
            loop = asyncio.get_running_loop()

            def fire(_event: Any) -> None:
                loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._handle(name, coro)))

            self._watches[name] = fire
        return self._watches[name]

    async def _handle(self, name: str, coro: Callable[[], Awaitable[None]]) -> None:
        """Run a watch's handler until it succeeds or we stop being the controller: the handler
        re-arms its one-shot watch with its read, and a read that failed left no watch at all (the
        simulator found it: no broker registered after a power loss got a partition)."""
        await until_done(coro, lambda: self.state is None, f"controller: the {name} watch handler")

    # --- failover (D) ----------------------------------------------------------------------------
    async def become_active(self, epoch: int) -> None:
        """Seed 003 D: read everything, fix leaderless partitions, send LeaderAndIsr with INIT to all
        (the complete list of each broker's replicas), then resume the operator requests that were
        under way (steps 7-9: reassignments, partition adds, a pending preferred election)."""
        async with self.lock:
            self.state = ControllerState(epoch)
            log.info("broker %d is controller with epoch %d", self.broker_id, epoch)
            lost = await self._read_brokers()
            topics = await self.store(self.zk.topics, self.watch("topics", self.on_topics_changed))
            for t in topics:
                await self.load_topic(t)
            await self._elect_where_needed(lost=self._acted_on(lost))
            await self._handled(lost)
            self.broadcast(init=True, full=True)
            await self.ops.resume()
            if epoch > 1:
                _FAILOVER()
        self._timers = [asyncio.ensure_future(self._every(self.settings.reassignment_check_interval_s,
                                                          self.ops.reassignment_tick))]
        if self.settings.auto_leader_rebalance:
            self._timers.append(asyncio.ensure_future(self._every(self.settings.leader_imbalance_check_interval_s,
                                                                  self.ops.auto_rebalance)))

    def resign(self) -> None:
        if self.state is not None:
            log.info("broker %d resigns as controller", self.broker_id)
        self.state = None
        self.channels.close()
        for t in self._timers:
            t.cancel()
        self._timers = []

    async def _every(self, seconds: float, fn: Callable[[], Awaitable[Any]]) -> None:
        while self.state is not None:
            await asyncio.sleep(seconds)
            try:
                await fn()
            except Exception:  # a failed periodic task must not stop the next one
                log.exception("controller periodic task %s failed", getattr(fn, "__name__", fn))

    async def load_topic(self, topic: str) -> list[Key]:
        """Read a topic's assignment; partitions without a state get their first leader (seed 003 B
        init_leaders). Returns the partitions that were new to this controller."""
        assert self.state is not None
        parts, version = await self.store(self.zk.topic_assignment, topic)
        self.state.topic_versions[topic] = version
        self.state.topic_configs[topic] = await self.store(self.zk.topic_config, topic)
        added = []
        for p, asg in sorted(parts.items()):
            key = (topic, p)
            if key in self.state.partitions:
                self.state.partitions[key].assignment = asg
                continue
            got = await self.store(self.zk.partition_state, topic, p)
            if got is None:
                await self.init_partition(topic, p, asg)
            else:
                self.state.partitions[key] = PartitionInfo(asg, got[0], got[1])
            added.append(key)
        return added

    async def init_partition(self, topic: str, p: int, asg: ReplicaAssignment) -> None:
        """Seed 003 B init_leaders: the first live replica leads, the live replicas form the ISR."""
        assert self.state is not None
        live = [r for r in asg.replicas if r in self.state.brokers]
        leader = live[0] if live else -1
        st = PartitionState(leader, 0, tuple(live) or asg.replicas, self.state.epoch)
        try:
            version = await self.store(self.zk.write_partition_state, topic, p, st, None)
        except StaleVersion:  # someone initialised it first: take theirs
            got = await self.store(self.zk.partition_state, topic, p)
            assert got is not None
            st, version = got
        self.state.partitions[(topic, p)] = PartitionInfo(asg, st, version)

    async def _elect_where_needed(self, gone: set[int] | None = None, lost: dict[int, str] | None = None
                                  ) -> list[Key]:
        """Seed 003 A: partitions whose leader is gone get a new one; dead replicas leave the ISR.
        `gone`: registered brokers to treat as dead all the same (bounced ones, see below). `lost`:
        brokers that came back without their data (KIP-966): they leave every ISR and the eligible
        leader replicas — even as the ISR's last member, which a bounce alone never removes — and
        lead nothing until they have caught up and rejoined the ISR."""
        assert self.state is not None
        out = set(lost or {})
        live = self.state.live - (gone or set()) - out
        changed = []
        for (topic, p), info in self.state.partitions.items():
            st = info.state
            isr = tuple(r for r in st.isr if r not in out)
            if st.leader in live and all(r in live for r in isr) and isr == st.isr and not out & set(st.elr):
                continue
            unclean = False
            if st.leader in live:  # only followers died: shrink the ISR, same leader epoch + 1
                new = PartitionState(st.leader, st.leader_epoch + 1, tuple(r for r in isr if r in live),
                                     self.state.epoch)
            else:
                elr = () if self.settings.ignore_lost_data else tuple(r for r in st.elr if r not in out)
                e = elect_leader(info.replicas, isr, live, unclean_allowed=self.unclean_allowed(topic), elr=elr)
                if e.leader == -1 and st.leader == -1 and e.isr == st.isr and not out & set(st.elr):
                    continue
                if e.unclean:
                    _UNCLEAN()
                    log.warning("%s-%d: unclean leader election of %d", topic, p, e.leader)
                elif e.leader != -1 and e.leader not in st.isr:
                    _ELR()
                    log.warning("%s-%d: eligible leader replica %d elected (the ISR %s is gone)", topic, p,
                                e.leader, list(st.isr))
                if e.leader == -1 and any(r in live and r not in isr for r in info.replicas):
                    _OFFLINE_LAGGARD()
                elif e.leader != -1 and len(e.isr) == 1:
                    _SOLE_ISR()
                new = PartitionState(e.leader, st.leader_epoch + 1, e.isr, self.state.epoch)
                unclean = e.unclean
            if await self.write(topic, p, info, new, lost=out, unclean=unclean):
                changed.append((topic, p))
        return changed

    async def _read_brokers(self) -> dict[int, str]:
        """Read the live brokers (and watch them); those whose registration says their process lost its
        data and that no controller has handled yet, with the incarnation of that process."""
        assert self.state is not None
        regs = await self.store(self.zk.registrations, self.watch("brokers", self.on_brokers_changed))
        self.state.brokers = {b: (r.host, r.port, r.epoch) for b, r in regs.items()}
        lost = {}
        for b, r in sorted(regs.items()):
            if r.lost_data and await self.store(self.zk.lost_data_handled, b) != r.lost_data:
                lost[b] = r.lost_data
        if lost and not self.settings.ignore_lost_data:
            log.warning("controller: brokers %s came back without their data: out of every ISR until they "
                        "catch up", sorted(lost))
        return lost

    def _acted_on(self, lost: dict[int, str]) -> dict[int, str]:
        """The lost-data processes this controller takes out of the ISRs: all of them, or none with
        `lost-disk-in-isr` (Kafka's ZooKeeper mode never learns that a disk was lost)."""
        return {} if self.settings.ignore_lost_data else lost

    async def _handled(self, lost: dict[int, str]) -> None:
        """Record that these lost-data processes are handled (after their ISR changes are written).
        Recorded with `lost-disk-in-isr` too, where handling is ignoring: the record says that a
        controller has processed that registration, which is what an observer waiting for the
        cluster to settle after a restart needs (`harness.systems.logbroker.db.restarts_registered`) — and
        what it must not wait for forever under the bug."""
        for b, incarnation in sorted(lost.items()):
            if self.state is not None:
                await self.store(self.zk.mark_lost_data_handled, b, incarnation)

    def min_insync(self, topic: str) -> int:
        """The topic's `min.insync.replicas` override, else the broker setting."""
        v = self.state.topic_configs.get(topic, {}).get("min.insync.replicas") if self.state else None
        return int(v) if v is not None else self.settings.min_insync_replicas

    def unclean_allowed(self, topic: str) -> bool:
        """The topic's `unclean.leader.election.enable` override, else the broker setting."""
        v = self.state.topic_configs.get(topic, {}).get("unclean.leader.election.enable") if self.state else None
        return v.lower() == "true" if v is not None else self.settings.unclean_leader_election

    async def write(self, topic: str, p: int, info: PartitionInfo, new: PartitionState, *,
                    lost: set[int] | frozenset[int] = frozenset(), unclean: bool = False) -> bool:
        """Write a partition's new state (conditionally on the version we know), with its eligible
        leader replicas brought up to date (`next_elr`)."""
        assert self.state is not None
        new = replace(new, elr=next_elr(info.state.isr, info.state.elr, new.isr, self.min_insync(topic), lost,
                                        unclean=unclean or self.settings.ignore_lost_data))
        try:
            info.version = await self.store(self.zk.write_partition_state, topic, p, new, info.version)
            info.state = new
            return True
        except StaleVersion:
            _RESIGNS()
            log.warning("%s-%d: partition state changed under us; a newer controller exists", topic, p)
            self.resign()
            return False

    async def write_assignment(self, topic: str, adding: dict[int, ReplicaAssignment] | None = None) -> bool:
        """Rewrite the topic znode from our view of its partitions (plus `adding`, new partitions that
        have no state yet), conditionally on its version."""
        if self.state is None:
            return False
        parts = {p: i.assignment for (t, p), i in self.state.partitions.items() if t == topic} | (adding or {})
        try:
            self.state.topic_versions[topic] = await self.store(self.zk.write_topic_assignment, topic, parts,
                                                                self.state.topic_versions[topic])
            return True
        except StaleVersion:
            log.warning("topic %s changed under us; a newer controller exists", topic)
            self.resign()
            return False

    # --- messages to brokers -------------------------------------------------------------------
    def partition_msg(self, topic: str, p: int, info: PartitionInfo) -> dict[str, Any]:
        st = info.state
        return {"topic": topic, "partition": p, "leader": st.leader, "leader_epoch": st.leader_epoch,
                "isr": list(st.isr), "replicas": list(info.replicas), "zk_version": info.version}

    def _brokers_msg(self) -> list[dict[str, Any]]:
        assert self.state is not None
        return [{"id": b, "host": h, "port": port, "epoch": e}
                for b, (h, port, e) in sorted(self.state.brokers.items())]

    def broadcast(self, *, init: bool = False, full: bool = False, only: Iterable[Key] | None = None,
                  to: list[int] | None = None) -> None:
        """LeaderAndIsr to each live replica of the partitions, then UpdateMetadata to every live broker
        (queued: see `channels.py`; the store already holds the decision, so nothing waits here).

        `full`: the message lists *every* replica the broker hosts (seed 003 C.3 and E.4), so it may
        set aside local replicas that are not listed; such a message goes to every target broker,
        even one that hosts nothing."""
        if self.state is None:
            return
        st = self.state
        keys = list(st.partitions) if only is None else list(only)
        targets = sorted(st.brokers) if to is None else [b for b in to if b in st.brokers]
        for b in targets:
            parts = [self.partition_msg(t, p, st.partitions[(t, p)]) for t, p in keys
                     if (t, p) in st.partitions and b in st.partitions[(t, p)].replicas]
            if parts or full:
                self._tell(b, {"type": "leader_and_isr", "controller_id": self.broker_id,
                               "controller_epoch": st.epoch, "init": init, "full": full,
                               "partitions": parts, "brokers": self._brokers_msg()})
        self.update_metadata()

    def update_metadata(self) -> None:
        if self.state is None:
            return
        st = self.state
        msg = {"type": "update_metadata", "controller_id": self.broker_id, "controller_epoch": st.epoch,
               "brokers": self._brokers_msg(), "topic_configs": st.topic_configs,
               "partitions": [self.partition_msg(t, p, i) for (t, p), i in st.partitions.items()],
               "seq": next(self._metadata_seq)}
        for b in sorted(st.brokers):
            self._tell(b, msg)

    def _tell(self, b: int, msg: dict[str, Any]) -> None:
        """Queue `msg` for broker `b`, addressed to its current registration (KIP-380's broker epoch).

        Why: a request can reach a broker long after it was sent. The channel closes a connection whose
        call timed out, but the kernel keeps retransmitting what was already written; a broker cut off
        for 14 s and registered again received, seconds after the controller's fresh UpdateMetadata,
        one queued during the cut that still named it leader. Clients bootstrapping there were sent
        back to it for a minute of NOT_LEADER (a container run's drain gave up). The broker refuses a
        request addressed to an earlier registration, and an UpdateMetadata older (by `seq`) than the
        one it applied."""
        assert self.state is not None
        self.channels.enqueue(b, {**msg, "broker_epoch": self.state.brokers[b][2]})

    def stop_replicas(self, targets: dict[int, list[Key]], *, delete: bool) -> None:
        """Seed 003 C StopReplica: stop fetching and serving these replicas, and delete their logs
        if `delete`. Each partition carries its current leader epoch, so a broker can refuse an order
        older than what it already knows. A dead target is skipped: it is told the complete list of
        its replicas when it starts again, and sets the rest aside then."""
        if self.state is None:
            return
        st = self.state
        for b, keys in sorted(targets.items()):
            if b not in st.brokers or not keys:
                continue
            parts = [{"topic": t, "partition": p,
                      "leader_epoch": st.partitions[(t, p)].state.leader_epoch if (t, p) in st.partitions else -1}
                     for t, p in keys]
            self._tell(b, {"type": "stop_replica", "controller_id": self.broker_id,
                           "controller_epoch": st.epoch, "delete": delete, "partitions": parts})

    # --- topic configs and deletion (admin APIs) ------------------------------------------------
    async def set_topic_configs(self, changes: dict[str, dict[str, str]]) -> dict[str, tuple[Err, str | None]]:
        """Store new overrides (already validated by the broker that took the request) and tell every
        broker. Turning unclean election on may elect a leader for an offline partition at once."""
        out: dict[str, tuple[Err, str | None]] = {}
        async with self.lock:
            if self.state is None:
                return {t: (Err.NOT_CONTROLLER, "this broker is not the controller") for t in changes}
            for topic, configs in changes.items():
                if topic not in self.state.topic_versions:
                    out[topic] = (Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist")
                    continue
                await self.store(self.zk.write_topic_config, topic, configs)
                self.state.topic_configs[topic] = dict(configs)
                out[topic] = (Err.NONE, None)
            changed = await self._elect_where_needed()
            if changed:
                self.broadcast(only=changed)
            else:
                self.update_metadata()
        return out

    async def delete_topic(self, topic: str) -> tuple[Err, str | None]:
        """Seed 003 B.2: remove the topic's znodes, then StopReplica with delete to every replica.
        Refused while a replica's broker is down: it would keep its old log, and a new topic of the
        same name would find that log under its own name (there are no topic ids here)."""
        async with self.lock:
            st = self.state
            if st is None:
                return Err.NOT_CONTROLLER, "this broker is not the controller"
            if topic not in st.topic_versions:
                return Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
            keys = [k for k in st.partitions if k[0] == topic]
            targets: dict[int, list[Key]] = {}
            for k in keys:
                for r in st.partitions[k].replicas:
                    targets.setdefault(r, []).append(k)
            down = sorted(set(targets) - st.live)
            if down:
                return Err.REPLICA_NOT_AVAILABLE, f"brokers {down} hold replicas and are offline; delete when back"
            await self.store(self.zk.delete_topic, topic)
            self.stop_replicas(targets, delete=True)
            for k in keys:
                del st.partitions[k]
                st.reassignments.pop(k, None)
            st.topic_versions.pop(topic, None)
            st.topic_configs.pop(topic, None)
            log.info("topic %s deleted (%d partitions)", topic, len(keys))
            self.update_metadata()
        return Err.NONE, None

    # --- events --------------------------------------------------------------------------------
    async def on_brokers_changed(self) -> None:
        """Seed 003 A (failure) and E (start-up).

        A broker that was killed and restarted within the session timeout may never be seen missing:
        its new registration replaces the old one before we look. Its broker epoch (the znode's czxid)
        has changed, though, and that is how we know (as Kafka's KIP-380 does): such a *bounced* broker
        lost its in-memory state and maybe unflushed writes, so it is handled as a failure — it leaves
        every ISR and leadership, where someone else can take over — and then as a start-up."""
        async with self.lock:
            if self.state is None:
                return
            old = dict(self.state.brokers)
            lost = await self._read_brokers()
            before, now = set(old), set(self.state.brokers)
            bounced = {b for b in before & now if old[b][2] != self.state.brokers[b][2]}
            if bounced:
                _BOUNCE()
            self.channels.keep_only(now - bounced)
            if before != now or bounced:
                log.info("controller: brokers %s -> %s%s", sorted(before), sorted(now),
                         f", restarted {sorted(bounced)}" if bounced else "")
            acted = self._acted_on(lost)
            changed = await self._elect_where_needed(gone=bounced, lost=acted) if bounced or acted else []
            changed += [k for k in await self._elect_where_needed() if k not in changed]
            await self._handled(lost)
            started = sorted((now - before) | bounced)
            if changed:
                self.broadcast(only=changed)
            if started:  # a (re)started broker learns all its partitions: it follows, truncates, catches up
                self.broadcast(to=started, full=True)
            elif not changed:
                self.update_metadata()
        if self.state is not None and self.state.reassignments:
            await self.ops.reassignment_tick()

    async def on_topics_changed(self) -> None:
        """Seed 003 B: a new /brokers/topics/<t> gets partition states and leaders."""
        async with self.lock:
            if self.state is None:
                return
            topics = await self.store(self.zk.topics, self.watch("topics", self.on_topics_changed))
            if self.state is None:  # resigned while the store answered
                return
            new = [t for t in topics if t not in self.state.topic_versions]
            keys: list[Key] = []
            for t in new:
                keys += await self.load_topic(t)
            if keys:
                self.broadcast(only=keys)

    async def alter_isr(self, req: dict[str, Any]) -> dict[str, Any]:
        """KIP-497: only the controller writes the ISR; the leader's request is checked against the
        broker epoch, the leader epoch and the znode version it was based on."""
        async with self.lock:
            if self.state is None:
                return {"error": int(Err.NOT_CONTROLLER)}
            key = (req["topic"], int(req["partition"]))
            info = self.state.partitions.get(key)
            if info is None:
                return {"error": int(Err.UNKNOWN_TOPIC_OR_PARTITION)}
            leader = int(req["broker_id"])
            if self.state.brokers.get(leader, (None, None, None))[2] != req["broker_epoch"]:
                _ALTER_STALE_BROKER()
                return {"error": int(Err.STALE_BROKER_EPOCH)}
            if info.state.leader != leader or info.state.leader_epoch != req["leader_epoch"]:
                _ALTER_FENCED()
                return {"error": int(Err.FENCED_LEADER_EPOCH)}
            if info.version != req["zk_version"]:
                _ALTER_VERSION()
                return {"error": int(Err.INVALID_UPDATE_VERSION), **self.partition_msg(*key, info)}
            isr = tuple(int(r) for r in req["isr"]
                        if (int(r) in self.state.brokers and int(r) in info.replicas) or int(r) == leader)
            if leader not in isr:
                return {"error": int(Err.INVALID_REQUEST)}
            new = PartitionState(leader, info.state.leader_epoch, isr, self.state.epoch)
            if not await self.write(key[0], key[1], info, new):
                return {"error": int(Err.NOT_CONTROLLER)}
            if len(isr) < self.min_insync(key[0]):
                _BELOW_MIN()
            log.info("%s-%d: ISR %s -> %s (AlterIsr from %d)", key[0], key[1], list(req.get("old_isr", [])),
                     list(isr), leader)
            moving = key in self.state.reassignments
            reply = {"error": 0, **self.partition_msg(*key, info)}
        self.update_metadata()
        if moving:  # seed 003 F: a new replica that joined the ISR may complete the move
            asyncio.ensure_future(self.ops.reassignment_tick([key]))
        return reply
