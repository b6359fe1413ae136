"""`ReplicaManager`: one broker's part in replication.

- Start-up (seed 003 E): register `/brokers/ids/<id>` (its czxid is our broker epoch), watch
  `/controller` and run for it when it is free.
- LeaderAndIsr (C): refuse a stale controller epoch, and per partition a stale leader epoch; become
  leader (own the ISR, track follower LEOs, HW = min LEO over the ISR) or follower (ask the leader
  OffsetForLeaderEpoch, truncate to its answer — KIP-101/279 — then fetch).
- As leader: a follower that caught up joins the ISR through AlterIsr to the controller and counts
  for HW at once; a follower that lags longer than replica.lag.time.max.ms is dropped through
  AlterIsr, and only once the controller has committed it (KIP-497).
- StopReplica (C): stop following and serving a replica the controller moved away, and delete it.
  A LeaderAndIsr marked `full` lists every replica this broker hosts; any other local replica is
  stopped and set aside as `<dir>.<controller epoch>.stray` (seed 003 C.3, E.4) — renamed, not
  deleted, because a wrong delete cannot be undone and a stray costs only disk.
- Bug switches change exactly one of these decisions each (`logbroker/bugs.py`).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import Any

from logbroker.bugs import Bug
from logbroker.controller.controller import Controller, ControllerSettings
from logbroker.controller.decisions import place_replicas
from logbroker.coord.zk import ZkStore
from logbroker.core.broker import BrokerCore, Reply
from logbroker.core.metadata import BrokerEndpoint, PartitionMeta
from logbroker.core.partition import Partition, Role, TopicPartition
from logbroker.log.batch import CorruptBatch
from logbroker.protocol.errors import Err
from logbroker.replication.admin_api import ControllerAdmin
from logbroker.replication.rpc import Peers
from logbroker.replication.truncation import truncation_offset

log = logging.getLogger(__name__)
STALE_CONTROLLER_EPOCH = int(Err.STALE_CONTROLLER_EPOCH)
FETCH_WAIT_MS = 200


class ReplicaManager:
    def __init__(self, core: BrokerCore) -> None:
        self.core = core
        self.cfg = core.config
        self.bid = core.config.broker_id
        self.bugs = core.config.bugs
        self.zk = ZkStore(core.config.zookeeper_connect, core.config.zookeeper_session_timeout_ms)
        self.control = Peers()
        self.fetch_peers = Peers()
        cfg = core.config
        self.controller = Controller(self.bid, self.zk, self._send, ControllerSettings(
            unclean_leader_election=cfg.unclean_leader_election,
            auto_leader_rebalance=cfg.auto_leader_rebalance,
            leader_imbalance_check_interval_s=cfg.leader_imbalance_check_interval_s,
            leader_imbalance_per_broker_percentage=cfg.leader_imbalance_per_broker_percentage))
        self.admin = ControllerAdmin(core, self.controller)
        self.broker_epoch = -1
        self.controller_epoch = 0
        self.zk_versions: dict[TopicPartition, int] = {}
        self.pending_isr: dict[TopicPartition, tuple[int, ...]] = {}
        self.fetchers: dict[TopicPartition, asyncio.Task[None]] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- life cycle ----------------------------------------------------------------------------
    async def start_async(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._zk(self.zk.start)
        # set our own view BEFORE registering: the controller answers a registration at once, and its
        # UpdateMetadata/LeaderAndIsr must not be overwritten by these start-up defaults
        self.core.metadata.brokers = {self.bid: BrokerEndpoint(self.bid, self.cfg.advertised_host,
                                                               self.cfg.advertised_port)}
        for p in self.core.partitions.values():
            p.role = Role.NONE  # wait for the controller's word (seed 003 E)
        self.broker_epoch = await self._zk(self.zk.register_broker, self.bid, self.cfg.advertised_host,
                                           self.cfg.advertised_port)
        self.zk.session_listeners.append(self._on_session)
        self.tasks.append(asyncio.create_task(self._isr_maintenance()))
        self.tasks.append(asyncio.create_task(self._checkpoint_loop()))
        await self._run_for_controller()
        log.info("broker %d registered with epoch %d", self.bid, self.broker_epoch)

    async def stop_async(self) -> None:
        for t in [*self.tasks, *self.fetchers.values()]:
            t.cancel()
        self.control.close()
        self.fetch_peers.close()
        await self._zk(self.zk.stop)

    async def _zk(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _on_session(self, state: str) -> None:
        """Kazoo thread: a LOST session drops our registration and /controller; re-register on the loop."""
        if state == "LOST" and self._loop is not None:
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._after_session_loss()))

    async def _after_session_loss(self) -> None:
        log.warning("ZooKeeper session lost; re-registering")
        self.controller.resign()
        for _ in range(600):
            try:
                self.broker_epoch = await self._zk(self.zk.register_broker, self.bid, self.cfg.advertised_host,
                                                   self.cfg.advertised_port)
                break
            except Exception as e:
                log.info("re-registration failed (%s); retrying", e)
                await asyncio.sleep(0.5)
        await self._run_for_controller()

    async def _run_for_controller(self) -> None:
        loop = asyncio.get_running_loop()

        def watch(_e: Any) -> None:
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._run_for_controller()))

        current = await self._zk(self.zk.controller, watch)
        if current is None:
            epoch = await self._zk(self.zk.try_become_controller, self.bid)
            if epoch is not None:
                await self.controller.become_active(epoch)
            else:
                await self._zk(self.zk.controller, watch)
        elif current != self.bid:
            self.controller.resign()

    async def _send(self, bid: int, body: dict[str, Any]) -> dict[str, Any] | None:
        """Controller -> broker; to ourselves without a socket."""
        if bid == self.bid:
            return await self.handle_internal(body)
        ep = self.controller.state.brokers.get(bid) if self.controller.state else None
        if ep is None:
            return None
        self.control.set_endpoint(bid, ep[0], ep[1])
        for attempt in range(5):  # a restarted broker leaves a dead pooled connection behind: reconnect
            try:
                return await self.control.get(bid).call(body)
            except ConnectionError as e:
                log.info("controller request to broker %d failed (attempt %d): %s", bid, attempt + 1, e)
                await asyncio.sleep(0.1 * (attempt + 1))
        return None

    # --- internal requests ---------------------------------------------------------------------
    async def handle_internal(self, body: dict[str, Any]) -> dict[str, Any]:
        kind = body["type"]
        if kind == "leader_and_isr":
            return self.leader_and_isr(body)
        if kind == "update_metadata":
            return self.update_metadata(body)
        if kind == "alter_isr":
            return await self.controller.alter_isr(body)
        if kind == "offset_for_leader_epoch":
            return self.offset_for_leader_epoch(body)
        if kind == "stop_replica":
            return self.stop_replica(body)
        return {"error": int(Err.INVALID_REQUEST)}

    def _stale_controller(self, epoch: int) -> bool:
        if epoch < self.controller_epoch and Bug.STALE_EPOCH_ACCEPTED not in self.bugs:
            log.warning("ignoring request from a stale controller (epoch %d < %d)", epoch, self.controller_epoch)
            return True
        self.controller_epoch = max(self.controller_epoch, epoch)
        return False

    def update_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._stale_controller(int(body["controller_epoch"])):
            return {"error": STALE_CONTROLLER_EPOCH}
        self.core.metadata.controller_id = int(body["controller_id"])
        self.core.metadata.brokers = {int(b["id"]): BrokerEndpoint(int(b["id"]), b["host"], int(b["port"]))
                                      for b in body["brokers"]}
        topics: dict[str, dict[int, PartitionMeta]] = {}
        for m in body["partitions"]:
            topics.setdefault(m["topic"], {})[int(m["partition"])] = PartitionMeta(
                int(m["leader"]), int(m["leader_epoch"]), tuple(m["replicas"]), tuple(m["isr"]))
        self.core.metadata.topics = topics
        for b in body["brokers"]:
            self.fetch_peers.set_endpoint(int(b["id"]), b["host"], int(b["port"]))
        return {"error": 0}

    def leader_and_isr(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._stale_controller(int(body["controller_epoch"])):
            return {"error": STALE_CONTROLLER_EPOCH}
        for b in body.get("brokers", []):
            self.fetch_peers.set_endpoint(int(b["id"]), b["host"], int(b["port"]))
        results = []
        for m in body["partitions"]:
            tp = TopicPartition(m["topic"], int(m["partition"]))
            p = self.core.open_partition(tp)
            epoch = int(m["leader_epoch"])
            if epoch < p.leader_epoch and Bug.STALE_EPOCH_ACCEPTED not in self.bugs:
                results.append({"topic": tp.topic, "partition": tp.partition, "error": int(Err.FENCED_LEADER_EPOCH)})
                continue
            if epoch == p.leader_epoch and p.role is not Role.NONE and not body.get("init"):
                # same epoch: only the ISR/version may have moved (AlterIsr committed)
                p.isr = list(m["isr"])
                self.zk_versions[tp] = int(m["zk_version"])
                results.append({"topic": tp.topic, "partition": tp.partition, "error": 0})
                continue
            p.replicas = list(m["replicas"])
            self.zk_versions[tp] = int(m["zk_version"])
            if int(m["leader"]) == self.bid:
                self.become_leader(p, epoch, list(m["isr"]))
            else:
                self.become_follower(p, int(m["leader"]), epoch)
            results.append({"topic": tp.topic, "partition": tp.partition, "error": 0})
        if body.get("full"):
            listed = {TopicPartition(m["topic"], int(m["partition"])) for m in body["partitions"]}
            for tp in [tp for tp in self.core.partitions if tp not in listed]:
                log.warning("%s: not assigned here any more; setting it aside", tp)
                self._forget(tp)
                self.core.remove_partition(tp, delete=False, aside=f"{self.controller_epoch}.stray")
        self.core.purgatory.check()
        return {"error": 0, "partitions": results}

    def stop_replica(self, body: dict[str, Any]) -> dict[str, Any]:
        """Seed 003 C stopReplica: stop fetching and serving, delete the log if asked. An order that
        carries an older leader epoch than ours is from before a change we already know of."""
        if self._stale_controller(int(body["controller_epoch"])):
            return {"error": STALE_CONTROLLER_EPOCH}
        delete = bool(body.get("delete"))
        results = []
        for m in body["partitions"]:
            tp = TopicPartition(m["topic"], int(m["partition"]))
            p = self.core.partitions.get(tp)
            epoch = int(m.get("leader_epoch", -1))
            if p is not None and 0 <= epoch < p.leader_epoch and Bug.STALE_EPOCH_ACCEPTED not in self.bugs:
                results.append({"topic": tp.topic, "partition": tp.partition, "error": int(Err.FENCED_LEADER_EPOCH)})
                continue
            self._forget(tp)
            if p is not None:
                self.core.remove_partition(tp, delete=delete)
                log.info("%s: replica stopped%s (leader epoch %d)", tp, " and deleted" if delete else "", epoch)
            results.append({"topic": tp.topic, "partition": tp.partition, "error": 0})
        return {"error": 0, "partitions": results}

    def _forget(self, tp: TopicPartition) -> None:
        self._stop_fetcher(tp)
        self.pending_isr.pop(tp, None)
        self.zk_versions.pop(tp, None)

    # --- admin APIs (answered by the controller; replication/admin_api.py) -----------------------
    def create_partitions(self, version: int, req: Any) -> Reply:
        return self.admin.create_partitions(version, req)

    def elect_leaders(self, version: int, req: Any) -> Reply:
        return self.admin.elect_leaders(version, req)

    def alter_partition_reassignments(self, version: int, req: Any) -> Reply:
        return self.admin.alter_partition_reassignments(version, req)

    def list_partition_reassignments(self, version: int, req: Any) -> Reply:
        return self.admin.list_partition_reassignments(version, req)

    # --- roles ---------------------------------------------------------------------------------
    def become_leader(self, p: Partition, epoch: int, isr: list[int]) -> None:
        self._stop_fetcher(p.tp)
        p.role, p.leader_id, p.leader_epoch, p.isr = Role.LEADER, self.bid, epoch, isr
        p.log.epochs.assign(epoch, p.leo)
        now = self.core.clock.monotonic_ms()
        p.follower_leo = {r: p.follower_leo.get(r, 0) for r in p.replicas if r != self.bid}
        p.follower_caught_up_ms = {r: now for r in p.replicas if r != self.bid}
        self.pending_isr.pop(p.tp, None)
        log.info("%s: leader at epoch %d, ISR %s, LEO %d, HW %d", p.tp, epoch, isr, p.leo, p.hw)
        p.maybe_advance_hw()

    def become_follower(self, p: Partition, leader: int, epoch: int) -> None:
        self._stop_fetcher(p.tp)
        p.role, p.leader_id, p.leader_epoch = Role.FOLLOWER, leader, epoch
        p.isr = []
        log.info("%s: follower of %d at epoch %d, LEO %d, HW %d", p.tp, leader, epoch, p.leo, p.hw)
        if leader >= 0:
            self.fetchers[p.tp] = asyncio.ensure_future(self._follow(p, leader, epoch))

    def _stop_fetcher(self, tp: TopicPartition) -> None:
        t = self.fetchers.pop(tp, None)
        if t is not None:
            t.cancel()

    # --- follower ------------------------------------------------------------------------------
    async def _truncate(self, p: Partition, leader: int, epoch: int) -> None:
        """KIP-101/279: ask the leader where our epochs end and cut there; the bug cuts to HW."""
        if Bug.TRUNCATE_TO_HW in self.bugs:
            cut = p.hw
            log.info("%s: truncating to HW %d (bug truncate-to-hw)", p.tp, cut)
        else:
            async def ask(my_epoch: int) -> tuple[int, int]:
                while p.role is Role.FOLLOWER and p.leader_epoch == epoch:
                    try:
                        reply = await self.fetch_peers.get(leader).call({
                            "type": "offset_for_leader_epoch", "topic": p.tp.topic, "partition": p.tp.partition,
                            "leader_epoch": my_epoch, "current_leader_epoch": epoch})
                    except (ConnectionError, KeyError) as e:
                        log.info("%s: OffsetForLeaderEpoch to %d failed: %s", p.tp, leader, e)
                        reply = {"error": -1}
                    if not reply.get("error"):
                        return int(reply["leader_epoch"]), int(reply["end_offset"])
                    await asyncio.sleep(0.2)
                raise asyncio.CancelledError

            cut = await truncation_offset(p.log.epochs, p.leo, p.hw, ask)
        if cut < p.leo:
            log.info("%s: truncating LEO %d -> %d before following %d", p.tp, p.leo, cut, leader)
            p.log.truncate_to(cut)
            p.producers.rebuild([h for h, _ in p.log.batches()])
        p.hw = min(p.hw, p.leo)

    async def _follow(self, p: Partition, leader: int, epoch: int) -> None:
        """Truncate, then fetch until our role changes. An unexpected error is logged and the whole
        thing starts over from truncation: a follower that silently stopped fetching would drop out
        of the ISR for good and nobody would know why."""
        while p.role is Role.FOLLOWER and p.leader_epoch == epoch:
            try:
                await self._fetch_from(p, leader, epoch)
                return
            except asyncio.CancelledError:
                return
            except Exception:
                log.exception("%s: following %d at epoch %d failed; starting over", p.tp, leader, epoch)
                try:
                    await asyncio.sleep(1.0)
                except asyncio.CancelledError:
                    return

    async def _fetch_from(self, p: Partition, leader: int, epoch: int) -> None:
        await self._truncate(p, leader, epoch)
        while p.role is Role.FOLLOWER and p.leader_epoch == epoch:
            try:
                part = await self.fetch_peers.get(leader).fetch(
                    self.bid, p.tp.topic, p.tp.partition, p.leo, epoch, FETCH_WAIT_MS,
                    timeout=FETCH_WAIT_MS / 1000 + 5)
            except (ConnectionError, KeyError) as e:
                log.debug("%s: fetch from %d failed: %s", p.tp, leader, e)
                await asyncio.sleep(0.2)
                continue
            if p.role is not Role.FOLLOWER or p.leader_epoch != epoch:
                return
            if part.error_code == Err.OFFSET_OUT_OF_RANGE:
                await self._truncate(p, leader, epoch)
                continue
            if part.error_code:
                await asyncio.sleep(0.1)
                continue
            if part.records:
                try:
                    info = p.log.append_as_follower(part.records)
                except CorruptBatch as e:
                    log.warning("%s: bad fetch data from %d: %s", p.tp, leader, e)
                    await asyncio.sleep(0.1)
                    continue
                if info is not None:
                    for h in info.headers:
                        p.producers.update(h)
            p.hw = max(p.hw, min(int(part.high_watermark), p.leo))

    # --- leader --------------------------------------------------------------------------------
    def offset_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]:
        p = self.core.partitions.get(TopicPartition(body["topic"], int(body["partition"])))
        if p is None or not p.is_leader():
            return {"error": int(Err.NOT_LEADER_OR_FOLLOWER)}
        cur = int(body.get("current_leader_epoch", -1))
        if cur >= 0 and cur != p.leader_epoch and Bug.STALE_EPOCH_ACCEPTED not in self.bugs:
            return {"error": int(Err.FENCED_LEADER_EPOCH if cur < p.leader_epoch else Err.UNKNOWN_LEADER_EPOCH)}
        e, end = p.log.epochs.end_offset_for(int(body["leader_epoch"]), p.leo)
        return {"error": 0, "leader_epoch": e, "end_offset": end}

    def on_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        now = self.core.clock.monotonic_ms()
        p.follower_leo[replica_id] = fetch_offset
        if fetch_offset >= p.leo:
            p.follower_caught_up_ms[replica_id] = now
        if replica_id not in p.isr and fetch_offset >= p.hw and replica_id in p.replicas \
                and p.tp not in self.pending_isr:
            # KIP-497: an expansion counts for HW at once (a bigger ISR only makes HW more careful)
            new_isr = tuple(sorted({*p.isr, replica_id}))
            p.isr = list(new_isr)
            self._alter_isr(p, new_isr)
        if p.maybe_advance_hw():
            self.core.purgatory.check()

    def on_leader_append(self, p: Partition) -> None:
        if p.maybe_advance_hw():
            self.core.purgatory.check()

    def accepts_produce(self, p: Partition) -> Err:
        if len(p.isr) < self.cfg.min_insync_replicas:
            return Err.NOT_ENOUGH_REPLICAS
        return Err.NONE

    def produce_complete_early(self) -> bool:
        """The ack-before-replication bug: answer acks=all once the leader has written."""
        return Bug.ACK_BEFORE_REPLICATION in self.bugs

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> Err:
        """Write the assignment under /brokers/topics; the controller takes it from there (seed 003 B)."""
        live = sorted(self.core.metadata.brokers)
        if partitions < 1:
            return Err.INVALID_PARTITIONS
        if replication_factor < 1 or replication_factor > len(live):
            return Err.INVALID_REPLICATION_FACTOR
        # a stable hash (not Python's per-process salted one): the same topic lands the same way every run
        assignment = place_replicas(partitions, replication_factor, live, start=zlib.crc32(name.encode()) % len(live))
        if not self.zk.create_topic(name, assignment):
            return Err.TOPIC_ALREADY_EXISTS
        return Err.NONE

    async def _isr_maintenance(self) -> None:
        """Drop followers that lag longer than replica.lag.time.max.ms (seed 001), via the controller."""
        lag = self.cfg.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(max(lag / 4000, 0.1))
            now = self.core.clock.monotonic_ms()
            for p in list(self.core.partitions.values()):
                if not p.is_leader() or p.tp in self.pending_isr:
                    continue
                laggards = [r for r in p.isr if r != self.bid and now - p.follower_caught_up_ms.get(r, now) > lag]
                if not laggards:
                    continue
                new_isr = tuple(r for r in p.isr if r not in laggards)
                log.info("%s: followers %s lag > %d ms; shrinking ISR to %s", p.tp, laggards, lag, list(new_isr))
                if Bug.LOCAL_ISR_SHRINK in self.bugs:
                    p.isr = list(new_isr)  # before KIP-497: the leader decides alone
                    if p.maybe_advance_hw():
                        self.core.purgatory.check()
                self._alter_isr(p, new_isr)

    def _alter_isr(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        self.pending_isr[p.tp] = new_isr
        asyncio.ensure_future(self._send_alter_isr(p, new_isr, p.leader_epoch))

    async def _send_alter_isr(self, p: Partition, new_isr: tuple[int, ...], epoch: int) -> None:
        try:
            for _ in range(50):
                if p.leader_epoch != epoch or not p.is_leader():
                    return
                body = {"type": "alter_isr", "broker_id": self.bid, "broker_epoch": self.broker_epoch,
                        "topic": p.tp.topic, "partition": p.tp.partition, "leader_epoch": epoch,
                        "isr": list(new_isr), "old_isr": list(p.isr), "zk_version": self.zk_versions.get(p.tp, -1)}
                cid = self.core.metadata.controller_id
                try:
                    if cid == self.bid:
                        reply = await self.controller.alter_isr(body)
                    elif cid in self.fetch_peers.endpoints:
                        self.control.set_endpoint(cid, *self.fetch_peers.endpoints[cid])
                        reply = await self.control.get(cid).call(body)
                    else:
                        reply = None  # we do not know the controller yet; UpdateMetadata will tell us
                except (ConnectionError, KeyError):
                    reply = None
                if reply is None or reply.get("error") == Err.NOT_CONTROLLER:
                    await asyncio.sleep(0.2)
                    continue
                if reply.get("error") == 0:
                    if p.leader_epoch == epoch:
                        p.isr = list(reply["isr"])  # the shrink takes effect only now (KIP-497)
                        self.zk_versions[p.tp] = int(reply["zk_version"])
                        if p.maybe_advance_hw():
                            self.core.purgatory.check()
                    return
                if reply.get("error") == Err.INVALID_UPDATE_VERSION and "zk_version" in reply:
                    self.zk_versions[p.tp] = int(reply["zk_version"])
                    p.isr = list(reply["isr"])
                    return
                log.info("%s: AlterIsr refused: %s", p.tp, Err(reply["error"]).name)
                return
        finally:
            self.pending_isr.pop(p.tp, None)

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            for p in list(self.core.partitions.values()):
                try:
                    p.log.write_hw_checkpoint(p.hw)
                except OSError as e:
                    log.warning("%s: HW checkpoint failed: %s", p.tp, e)
