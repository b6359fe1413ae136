"""`ReplicaManager`: one broker's part in replication — the asyncio runner around the decision core.

The decisions (LeaderAndIsr, StopReplica, ISR upkeep, AlterIsr replies) are pure functions in
`decisions.py`; this runner reads the local replicas into plain views, calls them, and performs the
effects they return (roles, fetchers, logs, AlterIsr requests). It is handed its `ClusterStore`
(ZooKeeper in a real broker, built by `__main__`) and an `Offload` for blocking calls; it never
builds either itself (issue 18).

- Start-up (seed 003 E): register `/brokers/ids/<id>` (its czxid is our broker epoch), watch
  `/controller` and run for it when it is free.
- LeaderAndIsr (C): refuse a stale controller epoch, and per partition a stale leader epoch; become
  leader (own the ISR, track follower LEOs, HW = min LEO over the ISR) or follower (handed to the
  fetcher of its leader broker, `fetcher.py`: truncate — KIP-101/279 — then fetch).
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
from collections.abc import Iterable
from typing import Any

from logbroker.bugs import Bug
from logbroker.controller.controller import Controller, ControllerSettings
from logbroker.controller.decisions import place_replicas
from logbroker.coord.retry import until_done
from logbroker.coord.store import ClusterStore
from logbroker.core.broker import BrokerCore, Reply
from logbroker.core.leader_host import Answer
from logbroker.core.metadata import FIRST_VIEW, BrokerEndpoint, PartitionMeta
from logbroker.core.partition import Partition, Role, TopicPartition
from logbroker.core.topic_admin import AlterBody
from logbroker.log.checkpoint import write_atomically
from logbroker.net import TCP, Network
from logbroker.offload import Offload
from logbroker.probes import probe
from logbroker.protocol.errors import Err
from logbroker.replication import decisions as rules
from logbroker.replication.admin_api import ControllerAdmin
from logbroker.replication.decisions import (
    BecomeFollower,
    BecomeLeader,
    CheckPurgatory,
    Effect,
    Local,
    ProposeAlterIsr,
    RemoveReplica,
    ReplicaState,
    SetEndpoints,
    SetIsr,
)
from logbroker.replication.fetcher import FetcherPool, FetcherSettings
from logbroker.replication.producer_ids import StoreProducerIds
from logbroker.replication.rpc import Peers

log = logging.getLogger(__name__)
_AFTER_LAGGING_FOLLOW = probe("leader-elected-after-lagging-follow")
_HW_BELOW_LEO = probe("leader-elected-hw-below-leo")
_BEYOND_LEO = probe("follower-fetches-beyond-leader-leo")
_SHRINK_WAITING = probe("isr-shrink-with-produce-waiting")
_BELOW_MIN_WAITING = probe("isr-below-min-insync-with-produce-waiting")
_NO_CONTROLLER = probe("alter-isr-controller-unavailable")
_MOOT = probe("alter-isr-moot")
_NO_DATA = probe("broker-starts-without-its-data")
_STALE_BROKER_EPOCH = probe("controller-request-stale-broker-epoch")
_UNREGISTERED = probe("controller-request-before-registration")
_METADATA_OUT_OF_ORDER = probe("update-metadata-out-of-order")
#: controller -> broker requests that are addressed to one registration of the broker (KIP-380)
_ADDRESSED = ("leader_and_isr", "update_metadata", "stop_replica")
#: how long a controller request waits for this broker's registration before it is refused: a current
#: controller writes to a broker only after its registration, which then completes at once
REGISTRATION_WAIT_S = 30.0
META_FILE = "meta.properties"  # Kafka's name for the file that says whose log directory this is
STALE_CONTROLLER_EPOCH = rules.STALE_CONTROLLER_EPOCH
KAFKA_REQUEST_TIMEOUT_S = 30.0  # request.timeout.ms, for Kafka requests to peers


def local_view(p: Partition) -> Local:
    """What the decisions need of a local replica, as plain values."""
    return Local(p.role, p.leader_epoch, tuple(p.isr), tuple(p.replicas), p.hw, dict(p.follower_caught_up_ms))


class ReplicaManager:
    def __init__(self, core: BrokerCore, store: ClusterStore, offload: Offload, net: Network = TCP) -> None:
        """`store`: the coordination service (the entry point builds `ZkStore`); `offload`: how blocking
        calls run (`offload.in_worker_thread` in a real broker); `net`: how peers are reached (real
        sockets, or the simulator's model network)."""
        self.core = core
        self.cfg = core.config
        self.bid = core.config.broker_id
        self.bugs = core.config.bugs
        self.zk = store
        self.offload = offload
        self.control = Peers(net)
        self.fetch_peers = Peers(net)
        self.kafka_peers = Peers(net)  # Kafka-protocol requests to other brokers (KIP-890 verification)
        cfg = core.config
        self.controller = Controller(self.bid, self.zk, self._send, ControllerSettings(
            unclean_leader_election=cfg.unclean_leader_election,
            auto_leader_rebalance=cfg.auto_leader_rebalance,
            leader_imbalance_check_interval_s=cfg.leader_imbalance_check_interval_s,
            leader_imbalance_per_broker_percentage=cfg.leader_imbalance_per_broker_percentage,
            min_insync_replicas=cfg.min_insync_replicas, ignore_lost_data=Bug.LOST_DISK_IN_ISR in self.bugs),
            offload=offload)
        self.admin = ControllerAdmin(core, self.controller)
        #: producer ids from blocks claimed in the store, never from this broker's disk (seed 70017)
        self.producer_ids = StoreProducerIds(store, offload, self.bid, lambda: self.stopping)
        core.producer_ids = self.producer_ids
        self.broker_epoch = -1
        #: set once this incarnation has registered and knows its broker epoch. Controller requests wait
        #: for it, as Kafka's broker serves no request before it registered (KafkaServer starts
        #: processing requests last): otherwise a restarted broker, waiting for its old session's
        #: registration to expire, took a partitioned old controller's LeaderAndIsr addressed to its
        #: previous incarnation, followed that controller's zombie leader, and the two acknowledged
        #: writes the real leader never had (coverage-bench seed 44, acknowledged records lost:
        #: docs/measurements/coverage.md, "Seed 44")
        self._registered = asyncio.Event()
        self._connected = False  # the coordination service's client has been started (once is enough)
        #: (controller epoch, seq) of the UpdateMetadata applied last: an older one arriving late is moot
        self._metadata_applied = (-1, 0)
        self.lost_data = ""  # this process's incarnation, when it found its log directory without our meta file
        self.state = ReplicaState(self.bid, frozenset(self.bugs))
        self.fetchers = FetcherPool(core, self._endpoint, FetcherSettings(
            self.bid, wait_ms=cfg.replica_fetch_wait_max_ms, truncate_to_hw=Bug.TRUNCATE_TO_HW in self.bugs), net)
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: partitions that became followers with their HW behind their LEO: that LEO (for a probe of
        #: KIP-101's double failover: elected again before the HW got there)
        self._lagging_follow: dict[TopicPartition, int] = {}

    # --- life cycle ----------------------------------------------------------------------------
    async def start_async(self) -> None:
        self._loop = asyncio.get_running_loop()
        # set our own view BEFORE registering: the controller answers a registration at once, and its
        # UpdateMetadata/LeaderAndIsr must not be overwritten by these start-up defaults
        self.core.metadata.brokers = {self.bid: BrokerEndpoint(self.bid, self.cfg.advertised_host,
                                                               self.cfg.advertised_port)}
        for p in self.core.partitions.values():
            p.role = Role.NONE  # wait for the controller's word (seed 003 E)
        # once, before any retry: a second look would find the meta file this one wrote, and the
        # registration would no longer say that this process started without its data
        self.lost_data = self._claim_log_dir()
        await until_done(self._join, lambda: self.stopping, f"broker {self.bid}: joining the cluster")
        if self.stopping:  # stopped before it ever registered
            return
        self._registered.set()
        self.producer_ids.start()
        self.zk.session_listeners.append(self._on_session)
        self.tasks.append(asyncio.create_task(self._isr_maintenance()))
        self.tasks.append(asyncio.create_task(self._checkpoint_loop()))
        await self._run_for_controller()
        log.info("broker %d registered with epoch %d", self.bid, self.broker_epoch)

    async def _join(self) -> None:
        """Connect to the coordination service (unless an earlier attempt did) and register.

        Retried by the caller until it succeeds: a ZooKeeper that did not answer in time, or a
        connection lost between connecting and registering, ended the start-up with an exception
        that ended the process, a moment after it had opened its port — nothing restarts a broker,
        so the cluster went on without it for good (a test cluster's setup on a loaded machine:
        broker 2's port answered, and it had not registered 90 s later). Kafka's ZooKeeper client
        likewise re-sends its requests after a connection loss."""
        if not self._connected:
            await self._zk(self.zk.start)
            self._connected = True
        self.broker_epoch = await self._zk(self.zk.register_broker, self.bid, self.cfg.advertised_host,
                                           self.cfg.advertised_port, self.lost_data)

    def _claim_log_dir(self) -> str:
        """This process's incarnation (the broker id and its start time) when the log directory has no
        meta file of ours: the broker starts without whatever data it had (a first start, or a replaced
        disk — KIP-966's unclean restart), and every registration of this process says so, so that the
        controller takes it out of every ISR and leadership once, until it has caught up. The file is
        written now (atomically, fsynced), so only the first start after a loss says so; "" otherwise."""
        meta = self.cfg.log_dirs / META_FILE
        if meta.is_file():
            return ""
        # an empty directory is every broker's first start (or a new disk): the same registration, said
        # calmly; records without the meta file are worth a warning (the file itself was lost)
        held = any(self.cfg.log_dirs.iterdir()) if self.cfg.log_dirs.is_dir() else False
        write_atomically(meta, f"version=0\nbroker.id={self.bid}\n")
        _NO_DATA()
        log.log(logging.WARNING if held else logging.INFO,
                "broker %d: no %s in %s (%s); registering as a broker without its data", self.bid, META_FILE,
                self.cfg.log_dirs, "it holds files, yet no meta file" if held else "empty: a first start or a new disk")
        return f"{self.bid}@{self.core.clock.now_ms()}"

    async def stop_async(self) -> None:
        """SIGTERM: stop fetching, give up the controller role, close the ZooKeeper session. Closing
        the session fires our own watches and a LOST state; `stopping` makes them no-ops, so a
        stopping broker neither registers again nor runs for controller."""
        self.stopping = True
        self.zk.session_listeners.clear()
        self.controller.resign()
        self.producer_ids.stop()
        for t in self.tasks:
            t.cancel()
        self.fetchers.stop()
        self.control.close()
        self.fetch_peers.close()
        self.kafka_peers.close()
        await self._zk(self.zk.stop)

    def _endpoint(self, bid: int) -> tuple[str, int] | None:
        return self.fetch_peers.endpoints.get(bid)

    async def _zk(self, fn: Any, *args: Any) -> Any:
        return await self.offload(fn, *args)

    def _local(self) -> dict[TopicPartition, Local]:
        return {tp: local_view(p) for tp, p in self.core.partitions.items()}

    def _on_session(self, state: str) -> None:
        """Kazoo thread: a LOST session drops our registration and /controller; re-register on the loop."""
        if state == "LOST" and self._loop is not None and not self.stopping:
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._after_session_loss()))

    async def _after_session_loss(self) -> None:
        if self.stopping:
            return
        log.warning("ZooKeeper session lost; re-registering")
        self.controller.resign()
        for _ in range(600):
            try:
                self.broker_epoch = await self._zk(self.zk.register_broker, self.bid, self.cfg.advertised_host,
                                                   self.cfg.advertised_port, self.lost_data)
                break
            except Exception as e:
                log.info("re-registration failed (%s); retrying", e)
                await asyncio.sleep(0.5)
        await self._run_for_controller()

    async def _run_for_controller(self) -> None:
        """Contend for /controller (or watch it), again until the ZooKeeper reads succeed. The watch is
        one-shot and re-armed only by a successful read: one that failed (a connection loss, an
        expired session) left this broker deaf to a free /controller for good, and once every broker
        was, the cluster had no controller and no partition a leader (seen in container runs after
        partitions; the controller's own watches had the same flaw, found by the simulator)."""
        await until_done(self._contend_for_controller, lambda: self.stopping, "running for controller")

    async def _contend_for_controller(self) -> None:
        loop = asyncio.get_running_loop()

        def watch(_e: Any) -> None:
            if not self.stopping:
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
        elif not self.controller.active:
            if await self._zk(self.zk.drop_controller_of_dead_session, self.bid):
                return  # our watch on /controller fires for its deletion: we contend again then
            # we won, but loading the cluster failed part-way: finish it
            await self.controller.become_active(await self._zk(self.zk.controller_epoch))

    async def _send(self, bid: int, body: dict[str, Any]) -> dict[str, Any] | None:
        """Controller -> broker; to ourselves without a socket.

        A request that cannot be delivered is retried, with a growing pause, for as long as this
        broker is the active controller and `bid` is live in its state — as Kafka's
        ControllerChannelManager does. Giving up after a few attempts left a broker that was cut off
        from the controller for longer without its LeaderAndIsr for good: it never fetched again and
        the cluster never recovered (simulated seed 90885: the controller's requests to a restarted
        broker were dropped for longer than its five attempts spanned, the last failing just after the
        cut was lifted; docs/measurements/detection.md, "2026-11-28: seed 90885 analysed"). Each
        broker has its own sender (`controller/channels.py`), so a broker that is out of reach delays
        only its own requests; when it leaves the live set its channel is closed and this wait
        cancelled."""
        if bid == self.bid:
            return await self.handle_internal(body)
        attempt = 0
        while True:
            ep = self.controller.state.brokers.get(bid) if self.controller.active and self.controller.state else None
            if ep is None:
                return None  # no longer ours to tell, or no longer live: it is told afresh when it registers
            self.control.set_endpoint(bid, ep[0], ep[1])
            try:
                return await self.control.get(bid).call(body)
            except ConnectionError as e:  # a restarted broker also leaves a dead pooled connection behind
                attempt += 1
                if attempt <= 5 or attempt % 20 == 0:
                    log.info("controller request to broker %d failed (attempt %d): %s", bid, attempt, e)
                await asyncio.sleep(min(0.1 * attempt, 1.0))

    # --- internal requests ---------------------------------------------------------------------
    async def handle_internal(self, body: dict[str, Any]) -> dict[str, Any]:
        kind = body["type"]
        if kind in _ADDRESSED and not self._registered.is_set():
            _UNREGISTERED()
            try:  # until then no request can be told stale
                await asyncio.wait_for(self._registered.wait(), REGISTRATION_WAIT_S)
            except TimeoutError:
                log.warning("ignoring %s: this broker has not registered yet", kind)
                return {"error": int(Err.STALE_BROKER_EPOCH)}
        if kind in _ADDRESSED and -1 < int(body.get("broker_epoch", -1)) < self.broker_epoch:  # -1: unaddressed
            _STALE_BROKER_EPOCH()
            log.warning("ignoring %s addressed to an earlier registration of this broker (epoch %s < %d)", kind,
                        body.get("broker_epoch"), self.broker_epoch)
            return {"error": int(Err.STALE_BROKER_EPOCH)}
        if kind == "leader_and_isr":
            return self.leader_and_isr(body)
        if kind == "update_metadata":
            return self.update_metadata(body)
        if kind == "alter_isr":
            return await self.controller.alter_isr(body)
        if kind == "offsets_for_leader_epoch":
            return self.offsets_for_leader_epoch(body)
        if kind == "stop_replica":
            return self.stop_replica(body)
        if kind == "set_topic_configs":
            res = await self.controller.set_topic_configs({str(t): dict(c) for t, c in body["topics"].items()})
            return {"error": 0, "topics": {t: [int(e), m] for t, (e, m) in res.items()}}
        return {"error": int(Err.INVALID_REQUEST)}

    def update_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        self.state, stale = rules.controller_request(self.state, int(body["controller_epoch"]))
        if stale:
            log.warning("ignoring UpdateMetadata from a stale controller (epoch %s < %d)",
                        body["controller_epoch"], self.state.controller_epoch)
            return {"error": STALE_CONTROLLER_EPOCH}
        order = (int(body["controller_epoch"]), int(body.get("seq", 0)))
        if "seq" in body and order < self._metadata_applied:  # a whole snapshot older than the one we hold: keep ours
            _METADATA_OUT_OF_ORDER()
            log.warning("ignoring an UpdateMetadata older than the one applied (%s < %s)", order,
                        self._metadata_applied)
            return {"error": 0}
        self._metadata_applied = order
        self.core.metadata.controller_id = int(body["controller_id"])
        self.core.metadata.brokers = {int(b["id"]): BrokerEndpoint(int(b["id"]), b["host"], int(b["port"]))
                                      for b in body["brokers"]}
        topics: dict[str, dict[int, PartitionMeta]] = {}
        for m in body["partitions"]:
            topics.setdefault(m["topic"], {})[int(m["partition"])] = PartitionMeta(
                int(m["leader"]), int(m["leader_epoch"]), tuple(m["replicas"]), tuple(m["isr"]))
        self.core.metadata.topics = topics
        self.core.metadata.complete = True
        self.core.purgatory.check([FIRST_VIEW])  # the Metadata requests that waited for it
        if "topic_configs" in body:
            self.core.set_topic_configs({str(t): dict(c) for t, c in body["topic_configs"].items()})
        for b in body["brokers"]:
            self.fetch_peers.set_endpoint(int(b["id"]), b["host"], int(b["port"]))
        return {"error": 0}

    def leader_and_isr(self, body: dict[str, Any]) -> dict[str, Any]:
        if int(body["controller_epoch"]) >= self.state.controller_epoch or self.state.stale_accepted():
            for m in body["partitions"]:  # a replica the controller assigns here exists from now on
                self.core.open_partition(TopicPartition(m["topic"], int(m["partition"])))
        return self._decide(rules.leader_and_isr(self.state, self._local(), body), "LeaderAndIsr", body)

    def stop_replica(self, body: dict[str, Any]) -> dict[str, Any]:
        """Seed 003 C stopReplica (rules in `decisions.stop_replica`)."""
        return self._decide(rules.stop_replica(self.state, self._local(), body), "StopReplica", body)

    def _decide(self, d: rules.Decision, what: str, body: dict[str, Any]) -> dict[str, Any]:
        if d.reply is not None and d.reply.get("error") == STALE_CONTROLLER_EPOCH:
            log.warning("ignoring %s from a stale controller (epoch %s < %d)", what, body["controller_epoch"],
                        d.state.controller_epoch)
        self.state = d.state
        self._perform(d.effects)
        assert d.reply is not None
        return d.reply

    def _perform(self, effects: Iterable[Effect]) -> None:
        """Carry out the decision core's effects, in order."""
        for e in effects:
            if isinstance(e, SetEndpoints):
                for bid, host, port in e.brokers:
                    self.fetch_peers.set_endpoint(bid, host, port)
            elif isinstance(e, BecomeLeader):
                p = self.core.partitions[e.tp]
                p.replicas = list(e.replicas)
                self.become_leader(p, e.epoch, list(e.isr))
            elif isinstance(e, BecomeFollower):
                p = self.core.partitions[e.tp]
                p.replicas = list(e.replicas)
                self.become_follower(p, e.leader, e.epoch)
            elif isinstance(e, SetIsr):
                p = self.core.partitions[e.tp]
                p.set_isr(list(e.isr), committed=e.committed)
                self._isr_set(p)
                if e.advance_hw and self.advance_hw(p):
                    self.core.purgatory.check()
            elif isinstance(e, RemoveReplica):
                self._stop_fetcher(e.tp)
                if e.aside is not None:
                    log.warning("%s: not assigned here any more; setting it aside", e.tp)
                if self.core.remove_partition(e.tp, delete=e.delete, aside=e.aside) and e.aside is None:
                    log.info("%s: replica stopped%s", e.tp, " and deleted" if e.delete else "")
            elif isinstance(e, ProposeAlterIsr):
                asyncio.ensure_future(self._send_alter_isr(self.core.partitions[e.tp], e))
            elif isinstance(e, CheckPurgatory):
                self.core.purgatory.check()

    # --- admin APIs (answered by the controller; replication/admin_api.py) -----------------------
    def create_partitions(self, version: int, req: Any) -> Reply:
        return self.admin.create_partitions(version, req)

    def elect_leaders(self, version: int, req: Any) -> Reply:
        return self.admin.elect_leaders(version, req)

    def alter_partition_reassignments(self, version: int, req: Any) -> Reply:
        return self.admin.alter_partition_reassignments(version, req)

    def list_partition_reassignments(self, version: int, req: Any) -> Reply:
        return self.admin.list_partition_reassignments(version, req)

    def delete_topics(self, version: int, names: list[str], timeout_ms: int) -> Reply:
        return self.admin.delete_topics(version, names, timeout_ms)

    def alter_topic_configs(self, version: int, changes: dict[str, dict[str, str]], body: AlterBody) -> Reply:
        return self.admin.alter_topic_configs(version, changes, body, self._to_controller)

    async def _to_controller(self, body: dict[str, Any]) -> dict[str, Any] | None:
        cid = self.core.metadata.controller_id
        if cid not in self.fetch_peers.endpoints:
            return None
        self.control.set_endpoint(cid, *self.fetch_peers.endpoints[cid])
        try:
            return await self.control.get(cid).call(body, timeout=30)
        except ConnectionError:
            return None

    # --- roles ---------------------------------------------------------------------------------
    def become_leader(self, p: Partition, epoch: int, isr: list[int]) -> None:
        self._stop_fetcher(p.tp)
        lagging_leo = self._lagging_follow.pop(p.tp, None)
        if lagging_leo is not None and p.hw < lagging_leo:
            _AFTER_LAGGING_FOLLOW()
        if p.hw < p.leo:
            _HW_BELOW_LEO()
        p.role, p.leader_id, p.leader_epoch = Role.LEADER, self.bid, epoch
        p.set_isr(isr)
        p.log.epochs.assign(epoch, p.leo)
        p.epoch_start_offset = p.leo
        now = self.core.clock.monotonic_ms()
        p.follower_leo = {r: p.follower_leo.get(r, 0) for r in p.replicas if r != self.bid}
        p.follower_caught_up_ms = {r: now for r in p.replicas if r != self.bid}
        p.follower_last_fetch = {}
        log.info("%s: leader at epoch %d, ISR %s, LEO %d, HW %d", p.tp, epoch, isr, p.leo, p.hw)
        self.advance_hw(p)

    def become_follower(self, p: Partition, leader: int, epoch: int) -> None:
        self._stop_fetcher(p.tp)
        if p.hw < p.leo:
            self._lagging_follow[p.tp] = p.leo
        else:
            self._lagging_follow.pop(p.tp, None)
        p.role, p.leader_id, p.leader_epoch = Role.FOLLOWER, leader, epoch
        p.set_isr([])
        log.info("%s: follower of %d at epoch %d, LEO %d, HW %d", p.tp, leader, epoch, p.leo, p.hw)
        if leader >= 0:
            self.fetchers.follow(p, leader, epoch)

    def _stop_fetcher(self, tp: TopicPartition) -> None:
        self.fetchers.unfollow(tp)

    # --- leader --------------------------------------------------------------------------------
    def offsets_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]:
        """OffsetForLeaderEpoch for many partitions at once (a fetcher asks for all it truncates)."""
        return {"error": 0, "partitions": [{"topic": m["topic"], "partition": int(m["partition"]),
                                            **self._offset_for_leader_epoch(m)} for m in body["partitions"]]}

    def _offset_for_leader_epoch(self, m: dict[str, Any]) -> dict[str, Any]:
        p = self.core.partitions.get(TopicPartition(m["topic"], int(m["partition"])))
        if p is None or not p.is_leader():
            return {"error": int(Err.NOT_LEADER_OR_FOLLOWER)}
        err = rules.fenced_epoch(self.state, int(m.get("current_leader_epoch", -1)), p.leader_epoch)
        if err != Err.NONE:
            return {"error": int(err)}
        e, end = p.log.epochs.end_offset_for(int(m["leader_epoch"]), p.leo)
        return {"error": 0, "leader_epoch": e, "end_offset": end}

    def on_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        """Called for every partition of a follower's fetch (a session's idle ones included), so the
        common case — an ISR member whose position did not move — returns early."""
        moved = p.follower_leo.get(replica_id) != fetch_offset
        if fetch_offset > p.leo:
            _BEYOND_LEO()
        p.record_follower_fetch(replica_id, fetch_offset, self.core.clock.monotonic_ms())
        if not moved and replica_id in p.isr:
            return
        if replica_id not in p.isr:  # KIP-497: maybe propose it for the ISR (decisions.follower_fetched)
            d = rules.follower_fetched(self.state, p.tp, local_view(p), replica_id, fetch_offset)
            self.state = d.state
            self._perform(d.effects)
        if self.advance_hw(p):
            self.core.purgatory.check([p.tp])

    def on_leader_append(self, p: Partition) -> None:
        self.advance_hw(p)  # the core checks the purgatory for this partition next

    def advance_hw(self, p: Partition) -> bool:
        """`Partition.maybe_advance_hw` under the effective min.insync.replicas: the topic's, capped
        at the partition's replica count (KAFKA-15583), so a topic with fewer replicas than the
        setting is not frozen for good. True if HW moved."""
        min_isr = self.core.topic_settings(p.tp.topic).min_insync_replicas
        return p.maybe_advance_hw(min(min_isr, max(len(p.replicas), 1)))

    def accepts_produce(self, p: Partition) -> Err:
        if len(p.isr) < self.core.topic_settings(p.tp.topic).min_insync_replicas:
            return Err.NOT_ENOUGH_REPLICAS
        return Err.NONE

    def ask_broker(self, broker_id: int, request_cls: Any, response_cls: Any, version: int, body: dict[str, Any],
                   answer: Answer) -> None:
        """Send a Kafka request to `broker_id` in a task of its own; `answer` runs on the loop with the
        decoded response, or None (unknown broker, connection failure, timeout)."""
        ep = self.fetch_peers.endpoints.get(broker_id)
        if ep is None:
            answer(None)
            return
        self.kafka_peers.set_endpoint(broker_id, *ep)

        async def go() -> None:
            try:
                resp = await self.kafka_peers.get(broker_id).request(request_cls, response_cls, version, body,
                                                                     timeout=KAFKA_REQUEST_TIMEOUT_S)
            except ConnectionError as e:
                log.info("%s to broker %d failed: %s", request_cls.__name__, broker_id, e)
                resp = None
            answer(resp)

        asyncio.ensure_future(go())

    def produce_complete_early(self) -> bool:
        """The ack-before-replication bug: answer acks=all once the leader has written."""
        return Bug.ACK_BEFORE_REPLICATION in self.bugs

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: dict[int, list[int]] | None = None) -> Err:
        """Write the configs and the assignment under /config/topics and /brokers/topics; the
        controller takes it from there (seed 003 B)."""
        live = sorted(self.core.metadata.brokers)
        if assignment is None:
            if partitions < 1:
                return Err.INVALID_PARTITIONS
            if replication_factor < 1 or replication_factor > len(live):
                return Err.INVALID_REPLICATION_FACTOR
            # a stable hash (not Python's per-process salted one): the same topic lands the same way every run
            assignment = place_replicas(partitions, replication_factor, live,
                                        start=zlib.crc32(name.encode()) % len(live))
        if not self.zk.create_topic(name, assignment, configs):
            return Err.TOPIC_ALREADY_EXISTS
        return Err.NONE

    async def _isr_maintenance(self) -> None:
        """Drop followers that lag longer than replica.lag.time.max.ms (seed 001), via the controller."""
        lag = self.cfg.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(max(lag / 4000, 0.1))
            d = rules.isr_upkeep(self.state, self._local(), self.core.clock.monotonic_ms(), lag)
            for e in d.effects:
                if isinstance(e, ProposeAlterIsr):
                    if len(e.isr) < len(self.core.partitions[e.tp].isr) and self.core.purgatory.has_waiting(e.tp):
                        _SHRINK_WAITING()
                    log.info("%s: followers lag > %d ms; shrinking ISR to %s", e.tp, lag, list(e.isr))
            self.state = d.state
            self._perform(d.effects)

    async def _send_alter_isr(self, p: Partition, proposal: ProposeAlterIsr) -> None:
        """Send one AlterIsr until the controller answers, for as long as we lead at the proposal's
        epoch (retrying, with a capped backoff, while the controller is unknown, moving, or cannot
        reach its store); the reply is the decision core's to judge (`decisions.alter_isr_reply`).

        Never give up while the proposal stands: an expansion already counts here (the local ISR
        holds the follower), so an AlterIsr that is dropped leaves this leader and the controller
        with different ISRs until something else changes. The simulator found it (sim-search,
        seed 30105): the controller was this broker, its ZooKeeper write raised ConnectionLoss,
        the exception ended this task, and the partition's ISR stayed short for good."""
        delay = 0.2
        try:
            while True:
                body = rules.alter_isr_request(self.state, p.tp, local_view(p), proposal, self.broker_epoch)
                if body is None:
                    _MOOT()
                    return
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
                except Exception as e:  # our own controller could not write (a remote one closes the connection)
                    log.warning("%s: AlterIsr failed in the controller (%s: %s); again in %.1f s",
                                p.tp, type(e).__name__, e, delay)
                    reply = None
                if reply is None or reply.get("error") == Err.NOT_CONTROLLER:
                    _NO_CONTROLLER()
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 3.0)
                    continue
                if reply.get("error") not in (0, Err.INVALID_UPDATE_VERSION):
                    log.info("%s: AlterIsr refused: %s", p.tp, Err(reply["error"]).name)
                d = rules.alter_isr_reply(self.state, p.tp, local_view(p), proposal, reply)
                self.state = d.state
                self._apply_to(p, d.effects)
                return
        finally:
            self.state = rules.alter_isr_done(self.state, p.tp)

    def _apply_to(self, p: Partition, effects: Iterable[Effect]) -> None:
        """An AlterIsr reply's effects, on the partition object the request was made for (it may have
        been removed from the broker meanwhile; then nothing serves it any more)."""
        for e in effects:
            if isinstance(e, SetIsr):
                p.set_isr(list(e.isr), committed=e.committed)
                self._isr_set(p)
                if e.advance_hw and self.advance_hw(p):
                    self.core.purgatory.check()
            else:
                self._perform([e])

    def _isr_set(self, p: Partition) -> None:
        if (len(p.isr) < self.core.topic_settings(p.tp.topic).min_insync_replicas and p.is_leader()
                and self.core.purgatory.has_waiting(p.tp)):
            _BELOW_MIN_WAITING()

    async def _checkpoint_loop(self) -> None:
        """Once a second, write the HW checkpoint of each partition whose HW moved, through `offload` (a
        worker thread in a real broker):
        each write is two fsyncs, and 160 busy partitions would otherwise stall the event loop for
        tens of milliseconds every second (seen as acks=all p99 latency)."""
        written: dict[TopicPartition, int] = {}

        def write(todo: list[tuple[Partition, int]]) -> None:
            for p, hw in todo:
                try:
                    p.log.write_hw_checkpoint(hw)
                except OSError as e:
                    log.warning("%s: HW checkpoint failed: %s", p.tp, e)

        while True:
            await asyncio.sleep(1.0)
            todo = [(p, p.hw) for p in self.core.partitions.values() if written.get(p.tp) != p.hw]
            if todo:
                await self.offload(write, todo)
            written.update((p.tp, hw) for p, hw in todo)
            for tp in [tp for tp in written if tp not in self.core.partitions]:
                del written[tp]
