"""`BrokerCore`: handles decoded Kafka requests against local partitions; sans-IO.

`handle(api_key, version, request)` returns a `Reply`: a response body now, nothing (acks=0), or a
`Deferred` the purgatory completes later. The server adapter owns sockets and timers and calls
`tick()`; the core never blocks, sleeps or reads the wall clock except through its `Clock`.

Replication (cluster-impl II) plugs in through `self.replication`, an object with hooks for
follower fetches and ISR checks; in standalone mode it is `Standalone`, which makes this broker the
leader of everything with ISR = {self}.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from logbroker.bugs import Bug
from logbroker.config import BrokerConfig
from logbroker.core import admin
from logbroker.core.clock import Clock
from logbroker.core.control_hook import ControlBatchListener, IgnoreControlBatches
from logbroker.core.delete_records import delete_records
from logbroker.core.describe_producers import describe_producers
from logbroker.core.fetch_session import FetchContext, FetchSessionCache, SessionPartition
from logbroker.core.leader_epoch_api import offset_for_leader_epoch
from logbroker.core.leader_host import Answer, LeaderReplication
from logbroker.core.metadata import FIRST_VIEW, FIRST_VIEW_WAIT_MS, BrokerEndpoint, MetadataCache, PartitionMeta
from logbroker.core.partition import Partition, Role, TopicPartition
from logbroker.core.produce import ProduceHandler
from logbroker.core.producer_id import FileProducerIds, ProducerIds
from logbroker.core.purgatory import Body, Deferred, Purgatory
from logbroker.core.reply import TOPIC_RE, Reply
from logbroker.core.topic_admin import AlterBody, TopicAdmin
from logbroker.core.topic_config import TopicSettings, effective
from logbroker.core.txn_markers import TxnMarkerWriter
from logbroker.core.txn_verify import TxnVerifier
from logbroker.group.coordinator import GroupCoordinator
from logbroker.group.records import OFFSETS_TOPIC
from logbroker.log.batch import iter_batches
from logbroker.log.checkpoint import write_atomically
from logbroker.log.log import Log, LogConfig
from logbroker.probes import probe
from logbroker.protocol.apis import APIS, api_versions_body
from logbroker.protocol.errors import Err
from logbroker.txn.coordinator import TxnCoordinator

log = logging.getLogger(__name__)
_FETCH_FENCED = probe("fetch-fenced-leader-epoch")
_OUT_OF_RANGE = probe("fetch-offset-out-of-range")

TOPIC_CONFIGS = "topic-configs.json"
LATEST, EARLIEST = -1, -2
READ_COMMITTED = 1  # isolation_level of Fetch v4+ and ListOffsets v2+


class Replication(LeaderReplication, Protocol):
    """What the core asks of the replication layer (standalone: trivial answers); the leader's append
    calls are `LeaderReplication`'s."""

    def on_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None: ...

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: dict[int, list[int]] | None = None) -> Err: ...

    # topic admin (request reading and validation: core/topic_admin.py)
    def delete_topics(self, version: int, names: list[str], timeout_ms: int) -> Reply: ...

    def alter_topic_configs(self, version: int, changes: dict[str, dict[str, str]], body: AlterBody) -> Reply: ...

    # the admin APIs that move replicas and leaders (their request/response shapes: core/admin.py)
    def create_partitions(self, version: int, req: Any) -> Reply: ...

    def elect_leaders(self, version: int, req: Any) -> Reply: ...

    def alter_partition_reassignments(self, version: int, req: Any) -> Reply: ...

    def list_partition_reassignments(self, version: int, req: Any) -> Reply: ...


class BrokerCore:
    def __init__(self, config: BrokerConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metadata = MetadataCache()
        self.purgatory = Purgatory()
        self.fetch_sessions = FetchSessionCache()
        #: a standalone broker's; a clustered one's come from the store (`replication/producer_ids.py`)
        self.producer_ids: ProducerIds = FileProducerIds(config.log_dirs / "producer-id-block")
        self.metadata.brokers[config.broker_id] = BrokerEndpoint(config.broker_id, config.advertised_host,
                                                                 config.advertised_port)
        self.replication: Replication = Standalone(self)
        self.topic_admin = TopicAdmin(self)
        #: told of every marker the leader wrote and replicated (the group coordinator's pending
        #: transactional offsets hang on them; core/control_hook.py)
        self.control_listener: ControlBatchListener = IgnoreControlBatches()
        self.txn_verifier = TxnVerifier(self)
        self.produce_handler = ProduceHandler(self, self.txn_verifier, verify=config.transaction_kip890_enable
                                              and Bug.NO_TXN_VERIFICATION not in config.bugs)
        self.txn_markers = TxnMarkerWriter(self,
                                           ack_before_replication=Bug.MARKER_ACK_BEFORE_REPLICATION in config.bugs)
        self._settings: dict[str, TopicSettings] = {}
        self.handlers: dict[int, Callable[[int, Any], Reply]] = {
            0: self.produce_handler.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: self.metadata_request,
            18: self.api_versions,
            19: self.topic_admin.create_topics,
            20: self.topic_admin.delete_topics,
            32: self.topic_admin.describe_configs,
            33: lambda v, r: self.topic_admin.alter_configs(v, r, incremental=False),
            44: lambda v, r: self.topic_admin.alter_configs(v, r, incremental=True),
            23: lambda v, r: offset_for_leader_epoch(self.partitions, v, r),
            27: self.txn_markers.write_txn_markers,
            61: lambda v, r: describe_producers(self, v, r),
            21: lambda v, r: delete_records(self, v, r),
            37: lambda v, r: self.replication.create_partitions(v, r),
            43: lambda v, r: self.replication.elect_leaders(v, r),
            45: lambda v, r: self.replication.alter_partition_reassignments(v, r),
            46: lambda v, r: self.replication.list_partition_reassignments(v, r),
        }
        self.client_host = ""  # of the request being handled (`handle`)
        self.groups = GroupCoordinator(self)
        self.handlers.update(self.groups.handlers())
        self.control_listener = self.groups  # markers on __consumer_offsets end transactional offset commits
        self.txn = TxnCoordinator(self)  # InitProducerId (22), 24-26, 65, 66; FindCoordinator key type 1
        self.handlers.update(self.txn.handlers())
        self.groups.finders[1] = self.txn.coordinator_for

    # --- partitions ----------------------------------------------------------------------------
    def load_partitions(self) -> None:
        """Open every partition directory under log.dirs (recovery runs here)."""
        self.config.log_dirs.mkdir(parents=True, exist_ok=True)
        for d in sorted(self.config.log_dirs.iterdir()):
            if d.is_dir() and re.match(r"^.+-\d+$", d.name):
                self.open_partition(TopicPartition.parse(d.name))

    def open_partition(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            lg = Log(self.config.log_dirs / str(tp), self._log_config(tp.topic), self.clock.monotonic_ms)
            p = Partition(tp, lg, self.config.broker_id, lso_is_hw=Bug.LSO_IGNORES_OPEN_TXNS in self.config.bugs)
            p.load_producer_state()
            p.hw = lg.read_hw_checkpoint()
            self.partitions[tp] = p
        return p

    def remove_partition(self, tp: TopicPartition, *, delete: bool, aside: str | None = None) -> bool:
        """Seed 003 stopReplica: stop serving `tp` here. Waiting produces and fetches complete at once
        (NOT_LEADER_OR_FOLLOWER), the log is closed, and its directory is deleted (`delete`), renamed
        to `<dir>.<aside>` so an operator can still look at it (`aside`), or left as it is."""
        p = self.partitions.pop(tp, None)
        if p is None:
            return False
        p.role = Role.NONE
        self.purgatory.check()
        if not delete:
            p.snapshot()
        p.log.flush()
        p.log.write_hw_checkpoint(p.hw)
        p.log.close()
        if delete:
            shutil.rmtree(p.log.dir, ignore_errors=True)
        elif aside:
            p.log.dir.rename(p.log.dir.with_name(f"{p.log.dir.name}.{aside}"))
        return True

    def checkpoint(self) -> None:
        for p in self.partitions.values():
            p.log.flush()
            p.log.write_hw_checkpoint(p.hw)

    def close(self) -> None:
        self.checkpoint()
        for p in self.partitions.values():
            p.snapshot()
            p.log.close()

    def tick(self) -> None:
        now = self.clock.monotonic_ms()
        for p in self.partitions.values():
            if p.log.config.flush_ms < 2**61:  # a time-based flush policy is set (never, by default)
                p.log.maybe_flush()
        self.groups.tick()
        self.txn.tick()
        self.purgatory.expire(now)

    # --- dispatch ------------------------------------------------------------------------------
    def handle(self, api_key: int, version: int, request: Any, client_host: str = "") -> Reply:
        """`client_host`: where the request came from, as the transport knows it (group members
        report it in DescribeGroups); valid during this call only."""
        self.client_host = client_host
        return self.handlers[api_key](version, request)

    # --- ApiVersions ---------------------------------------------------------------------------
    def api_versions(self, version: int, request: Any) -> Reply:
        return Reply(version, api_versions_body())

    # --- Metadata ------------------------------------------------------------------------------
    def metadata_request(self, version: int, req: Any) -> Reply:
        every = req.topics is None or (version == 0 and not req.topics)  # v0 has no null: empty means all
        names: list[str] = sorted(self.metadata.topics) if every else [t.name for t in req.topics]
        if not self.metadata.complete:
            return self._metadata_awaiting_first_view(version, req, names)
        auto = self.config.auto_create_topics and (version < 4 or bool(req.allow_auto_topic_creation))
        topics = []
        for name in names:
            if name not in self.metadata.topics and auto and TOPIC_RE.match(name):
                self.replication.create_topic(name, self.config.num_partitions, self.config.default_replication_factor,
                                              {})
            parts = self.metadata.topics.get(name)
            if parts is None:
                err = Err.INVALID_TOPIC_EXCEPTION if not TOPIC_RE.match(name) else Err.UNKNOWN_TOPIC_OR_PARTITION
                topics.append({"error_code": int(err), "name": name, "is_internal": False, "partitions": []})
                continue
            topics.append({
                "error_code": 0,
                "name": name,
                "is_internal": name == OFFSETS_TOPIC,
                "partitions": [
                    {
                        "error_code": 0 if m.leader >= 0 else int(Err.LEADER_NOT_AVAILABLE),
                        "partition_index": i,
                        "leader_id": m.leader,
                        "leader_epoch": m.leader_epoch,
                        "replica_nodes": list(m.replicas),
                        "isr_nodes": list(m.isr),
                        "offline_replicas": [r for r in m.replicas if r not in self.metadata.brokers],
                    }
                    for i, m in sorted(parts.items())
                ],
            })
        return Reply(version, {
            "throttle_time_ms": 0,
            "brokers": [
                {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": None}
                for b in sorted(self.metadata.brokers.values(), key=lambda b: b.broker_id)
            ],
            "cluster_id": "logbroker",
            "controller_id": self.metadata.controller_id,
            "topics": topics,
        })

    def _metadata_awaiting_first_view(self, version: int, req: Any, names: list[str]) -> Reply:
        """Metadata asked of a broker that has not yet had the controller's first UpdateMetadata (a
        restarted broker, between opening its port and hearing from the controller). It has nothing
        true to say about the cluster, so it says nothing until it can: the request waits for that
        view, up to `FIRST_VIEW_WAIT_MS`, and is then answered as usual (as a KRaft broker serves no
        client before it has caught up with the metadata log). If the view does not come, the answer
        is an empty one, which the server does not send: it closes the connection, and the client
        asks another broker (issue 48).

        Why not answer at once: with itself as the only broker and every topic unknown (the first
        design), a client that refreshed there forgot every other broker and every leader; with no
        brokers (as ZooKeeper-mode Kafka's empty metadata cache), the Java client, kafka-python and
        aiokafka discard the answer and ask again, but librdkafka (confluent-kafka 2.16.1) took it
        and sent no Metadata request to anyone for the 30 s of its message timeout: every produce of
        a producer created just after a broker's restart failed (`test_repl_failover`, in CI)."""
        deadline = self.clock.monotonic_ms() + FIRST_VIEW_WAIT_MS

        def complete(timed_out: bool) -> Body:
            if self.metadata.complete:
                got = self.metadata_request(version, req)
                assert got.body is not None
                return got.body
            return {"throttle_time_ms": 0, "brokers": [], "cluster_id": "logbroker", "controller_id": -1,
                    "topics": [{"error_code": int(Err.LEADER_NOT_AVAILABLE if TOPIC_RE.match(n)
                                                  else Err.INVALID_TOPIC_EXCEPTION),
                                "name": n, "is_internal": n == OFFSETS_TOPIC, "partitions": []} for n in names]}

        return Reply(version, deferred=self.purgatory.add(Deferred(
            lambda: self.metadata.complete, complete, deadline, version, frozenset({FIRST_VIEW}))))

    # --- topic configs -------------------------------------------------------------------------
    def topic_settings(self, topic: str) -> TopicSettings:
        got = self._settings.get(topic)
        if got is None:
            got = self._settings[topic] = effective(self.config, self.metadata.topic_configs.get(topic, {}))
        return got

    def set_topic_configs(self, configs: dict[str, dict[str, str]]) -> None:
        """New overrides for every topic (UpdateMetadata, or a standalone change): open logs take their
        new segment and flush settings at once."""
        self.metadata.topic_configs = configs
        self._settings.clear()
        for p in self.partitions.values():
            p.log.config = self._log_config(p.tp.topic)

    def _log_config(self, topic: str) -> LogConfig:
        s = self.topic_settings(topic)
        return LogConfig(s.flush_messages, s.flush_ms, s.segment_bytes)

    def create_local_topic(self, name: str, partitions: int) -> None:
        """Standalone topic creation, or growth to `partitions`: open the partitions it does not have
        yet here, and lead them."""
        metas = self.metadata.topics.setdefault(name, {})
        for i in range(len(metas), partitions):
            p = self.open_partition(TopicPartition(name, i))
            self.become_standalone_leader(p)
            metas[i] = PartitionMeta(self.config.broker_id, p.leader_epoch, (self.config.broker_id,),
                                     (self.config.broker_id,))

    def become_standalone_leader(self, p: Partition) -> None:
        p.role, p.leader_id = Role.LEADER, self.config.broker_id
        p.replicas = [self.config.broker_id]
        p.set_isr([self.config.broker_id])
        p.leader_epoch = max(p.leader_epoch, p.log.epochs.latest_epoch, 0)
        p.hw = p.epoch_start_offset = p.leo

    # --- Fetch ---------------------------------------------------------------------------------
    def fetch(self, version: int, req: Any) -> Reply:
        """A consumer's or a follower's fetch, possibly within a fetch session (core/fetch_session.py).

        A follower's fetch positions are taken as its log end offsets when the request arrives (they
        move HW and the ISR). The request waits in the purgatory until some partition has records or
        an error for it, or max_wait_ms passes.

        A consumer reads up to the HW, or with isolation_level 1 (read_committed, Fetch v4+) up to the
        LSO, and then learns the aborted transactions of what it got (it drops their records itself).
        A marker can move the LSO without moving the HW: the purgatory is checked on every marker
        append and HW move, and a read_committed waiter's readiness is measured against the LSO."""
        replica_id = req.replica_id if req.replica_id is not None else -1
        committed = version >= 4 and replica_id < 0 and req.isolation_level == READ_COMMITTED
        wanted = {(t.topic, fp.partition): SessionPartition(
            fp.fetch_offset, fp.partition_max_bytes, getattr(fp, "current_leader_epoch", -1)
            if getattr(fp, "current_leader_epoch", None) is not None else -1)
            for t in req.topics for fp in t.partitions}
        if version >= 7:
            forgotten = [(f.topic, p) for f in (req.forgotten_topics_data or []) for p in f.partitions]
            ctx = self.fetch_sessions.new_context(req.session_id, req.session_epoch, wanted, forgotten,
                                                  self.clock.monotonic_ms())
        else:
            ctx = FetchContext(wanted, full=True)
        if ctx.error != Err.NONE:
            return Reply(version, {"throttle_time_ms": 0, "error_code": int(ctx.error), "session_id": 0,
                                   "responses": []})
        if replica_id >= 0:
            self._note_follower_fetch(ctx, replica_id)
        max_bytes = req.max_bytes if version >= 3 and req.max_bytes > 0 else 2**31 - 1

        def complete(timed_out: bool) -> Body:
            return self._fetch_response(ctx, replica_id, max_bytes, committed)

        def ready() -> bool:
            return any(self._fetchable(key, sp, replica_id, committed) != 0 for key, sp in ctx.partitions.items())

        if req.max_wait_ms <= 0 or not ctx.partitions or self._fetch_ready_now(ctx, replica_id, req.min_bytes,
                                                                                 committed):
            return Reply(version, complete(False))
        deadline = self.clock.monotonic_ms() + req.max_wait_ms
        keys = frozenset(TopicPartition(*k) for k in ctx.partitions)
        return Reply(version, deferred=self.purgatory.add(Deferred(ready, complete, deadline, version, keys)))

    def _note_follower_fetch(self, ctx: FetchContext, replica_id: int) -> None:
        for (topic, index), sp in ctx.partitions.items():
            p = self.partitions.get(TopicPartition(topic, index))
            if p is not None and p.is_leader() and self._epoch_error(p, sp.current_leader_epoch) is None:
                self.replication.on_follower_fetch(p, replica_id, sp.fetch_offset)

    @staticmethod
    def _epoch_error(p: Partition, current_leader_epoch: int) -> Err | None:
        if current_leader_epoch >= 0 and current_leader_epoch != p.leader_epoch:
            return Err.FENCED_LEADER_EPOCH if current_leader_epoch < p.leader_epoch else Err.UNKNOWN_LEADER_EPOCH
        return None

    def _fetch_ready_now(self, ctx: FetchContext, replica_id: int, min_bytes: int, committed: bool) -> bool:
        total = 0
        for key, sp in ctx.partitions.items():
            n = self._fetchable(key, sp, replica_id, committed)
            if n < 0:
                return True  # an error to report
            total += n
        return total >= max(1, min_bytes)

    def _fetchable(self, key: tuple[str, int], sp: SessionPartition, replica_id: int, committed: bool) -> int:
        """Offsets readable beyond the fetch position (a cheap stand-in for bytes); -1 for an error."""
        p = self.partitions.get(TopicPartition(*key))
        if p is None or not p.is_leader() or self._epoch_error(p, sp.current_leader_epoch) is not None:
            return -1
        if sp.fetch_offset < self._lower_bound(p, replica_id) or sp.fetch_offset > p.leo:
            return -1
        return max(0, self._upper_bound(p, replica_id, committed) - sp.fetch_offset)

    def _fetch_response(self, ctx: FetchContext, replica_id: int, max_bytes: int, committed: bool = False) -> Body:
        responses: dict[str, list[dict[str, Any]]] = {}
        budget = max_bytes
        served = []
        for (topic, index), sp in ctx.partitions.items():
            if not ctx.full and self._quiet(topic, index, sp, replica_id, committed):
                continue
            d = self._fetch_partition(topic, index, sp, replica_id, budget, committed, first=budget == max_bytes)
            n = len(d["records"])
            if n:
                budget -= n
                served.append((topic, index))
            elif not ctx.full and d["error_code"] == 0 and d["high_watermark"] == sp.sent_hw \
                    and d["log_start_offset"] == sp.sent_log_start and d["last_stable_offset"] == sp.sent_lso:
                continue  # incremental: nothing new to say about this partition
            sp.sent_hw, sp.sent_log_start, sp.sent_lso = d["high_watermark"], d["log_start_offset"], \
                d["last_stable_offset"]
            responses.setdefault(topic, []).append(d)
        ctx.rotate(served)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": ctx.response_session_id,
                "responses": [{"topic": t, "partitions": ps} for t, ps in responses.items()]}

    def _quiet(self, topic: str, index: int, sp: SessionPartition, replica_id: int, committed: bool) -> bool:
        """Nothing to say about this partition in an incremental response (the common case, checked
        without building its response)."""
        p = self.partitions.get(TopicPartition(topic, index))
        return (p is not None and p.is_leader() and p.hw == sp.sent_hw and p.log.log_start_offset == sp.sent_log_start
                and p.lso == sp.sent_lso and self._epoch_error(p, sp.current_leader_epoch) is None
                and sp.fetch_offset == self._upper_bound(p, replica_id, committed))

    @staticmethod
    def _lower_bound(p: Partition, replica_id: int) -> int:
        """Consumers read from the log start; a follower may still copy what DeleteRecords removed
        logically (a replica behind it must catch up through those bytes)."""
        return p.log.first_offset if replica_id >= 0 else p.log.log_start_offset

    @staticmethod
    def _upper_bound(p: Partition, replica_id: int, committed: bool) -> int:
        return p.leo if replica_id >= 0 else p.lso if committed else p.hw

    def _fetch_partition(self, topic: str, index: int, sp: SessionPartition, replica_id: int, budget: int,
                         committed: bool, *, first: bool) -> dict[str, Any]:
        p = self.partitions.get(TopicPartition(topic, index))
        base = {"partition_index": index, "high_watermark": -1, "last_stable_offset": -1,
                "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1,
                "records": b""}
        if p is None:
            return {**base, "error_code": int(Err.UNKNOWN_TOPIC_OR_PARTITION)}
        if not p.is_leader():
            return {**base, "error_code": int(Err.NOT_LEADER_OR_FOLLOWER)}
        epoch_err = self._epoch_error(p, sp.current_leader_epoch)
        if epoch_err is not None:
            _FETCH_FENCED()
            return {**base, "error_code": int(epoch_err)}
        ub = self._upper_bound(p, replica_id, committed)
        hdr: dict[str, Any] = {**base, "high_watermark": p.hw, "last_stable_offset": p.lso,
                               "log_start_offset": p.log.log_start_offset,
                               "aborted_transactions": [] if committed else None}
        if sp.fetch_offset < self._lower_bound(p, replica_id) or sp.fetch_offset > p.leo:
            _OUT_OF_RANGE()
            return {**hdr, "error_code": int(Err.OFFSET_OUT_OF_RANGE)}
        if sp.fetch_offset >= ub or (budget <= 0 and not first):
            # consumers: an offset between HW and LEO is valid but has nothing committed yet (003 §7)
            return {**hdr, "error_code": 0}
        # KIP-74, as Kafka: the first partition with data returns at least one batch, however large (or
        # its reader is stuck for good); later ones only what fits in what is left of the request's
        # budget, so the response stays within fetch.max.bytes (librdkafka drops a response larger than
        # its receive.message.max.bytes and asks again, forever: its test 0082 hung on one broker)
        data = p.log.read(sp.fetch_offset, max(min(sp.max_bytes, budget), 1), ub, min_one=first)
        if committed and data and p.log.aborted.entries:
            end = sp.fetch_offset
            for _, h in iter_batches(data, verify_crc=False):
                end = h.next_offset
            hdr["aborted_transactions"] = [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                                           for a in p.log.aborted.collect(sp.fetch_offset, end)]
        return {**hdr, "error_code": 0, "records": data}

    # --- ListOffsets ---------------------------------------------------------------------------
    def list_offsets(self, version: int, req: Any) -> Reply:
        committed = version >= 2 and req.isolation_level == READ_COMMITTED and req.replica_id < 0
        topics = []
        for t in req.topics:
            parts = []
            for lp in t.partitions:
                p = self.partitions.get(TopicPartition(t.name, lp.partition_index))
                r = {"partition_index": lp.partition_index, "timestamp": -1, "offset": -1, "leader_epoch": -1}
                if p is None:
                    r["error_code"] = int(Err.UNKNOWN_TOPIC_OR_PARTITION)
                elif not p.is_leader():
                    r["error_code"] = int(Err.NOT_LEADER_OR_FOLLOWER)
                else:
                    r["error_code"] = 0
                    r["leader_epoch"] = p.leader_epoch
                    bound = p.leo if req.replica_id >= 0 else p.lso if committed else p.hw
                    if lp.timestamp == LATEST:
                        r["offset"] = bound
                    elif lp.timestamp == EARLIEST:
                        r["offset"] = p.log.log_start_offset
                    else:
                        r["offset"], r["timestamp"] = self._offset_for_time(p, lp.timestamp, min(bound, p.hw))
                    # KIP-207: a client is not told an end (or "nothing at or after this time") from a HW
                    # still behind this leader epoch's start; it may be below what the previous leader
                    # answered. Retriable: the HW catches up once the followers fetch from us.
                    unknown_end = lp.timestamp == LATEST or (lp.timestamp != EARLIEST and r["offset"] < 0)
                    if req.replica_id < 0 and not p.hw_known() and unknown_end:
                        r.update(error_code=int(Err.OFFSET_NOT_AVAILABLE), offset=-1, timestamp=-1, leader_epoch=-1)
                parts.append(r)
            topics.append({"name": t.name, "partitions": parts})
        return Reply(version, {"throttle_time_ms": 0, "topics": topics})

    @staticmethod
    def _offset_for_time(p: Partition, ts: int, bound: int) -> tuple[int, int]:
        """First record below `bound` (HW, or LSO for read_committed) with timestamp >= ts (decodes only
        the one candidate batch; markers are not records a client can be pointed at)."""
        from kafka.record.default_records import DefaultRecordBatch

        start = p.log.log_start_offset
        for h, raw in p.log.batches_from(p.log.first_offset):
            if h.base_offset >= bound:
                break
            if h.max_timestamp >= ts and not h.is_control and h.last_offset >= start:
                for rec in DefaultRecordBatch(bytes(raw)):
                    if rec.timestamp >= ts and start <= rec.offset < bound:
                        return rec.offset, rec.timestamp
        return -1, -1

    # --- InitProducerId ------------------------------------------------------------------------

class Standalone:
    """Replication for a single broker without ZooKeeper: it leads everything, ISR = {self}."""

    def __init__(self, core: BrokerCore) -> None:
        self.core = core

    def start(self) -> None:
        metas: dict[str, dict[int, PartitionMeta]] = {}
        for p in self.core.partitions.values():
            self.core.become_standalone_leader(p)
            metas.setdefault(p.tp.topic, {})[p.tp.partition] = PartitionMeta(
                p.leader_id, p.leader_epoch, tuple(p.replicas), tuple(p.isr))
        self.core.metadata.topics.update(metas)
        self.core.metadata.controller_id = self.core.config.broker_id
        self.core.metadata.complete = True
        try:
            saved = json.loads((self.core.config.log_dirs / TOPIC_CONFIGS).read_text())
        except FileNotFoundError:
            saved = {}
        self.core.set_topic_configs({t: c for t, c in saved.items() if t in self.core.metadata.topics})

    def on_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        return None

    def on_leader_append(self, p: Partition) -> None:
        p.maybe_advance_hw()

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: dict[int, list[int]] | None = None) -> Err:
        if partitions < 1:
            return Err.INVALID_PARTITIONS
        if replication_factor != 1:
            return Err.INVALID_REPLICATION_FACTOR  # one broker can hold one replica
        if assignment is not None and any(r != [self.core.config.broker_id] for r in assignment.values()):
            return Err.INVALID_REPLICA_ASSIGNMENT
        self._save_configs({**self.core.metadata.topic_configs, name: dict(configs)})
        self.core.create_local_topic(name, partitions)
        return Err.NONE

    def _save_configs(self, configs: dict[str, dict[str, str]]) -> None:
        """Topic overrides survive a restart in log.dirs (a cluster keeps them in ZooKeeper)."""
        write_atomically(self.core.config.log_dirs / TOPIC_CONFIGS, json.dumps(configs, sort_keys=True))
        self.core.set_topic_configs(configs)

    def accepts_produce(self, p: Partition) -> Err:
        if len(p.isr) < self.core.topic_settings(p.tp.topic).min_insync_replicas:
            return Err.NOT_ENOUGH_REPLICAS
        return Err.NONE

    def ask_broker(self, broker_id: int, request_cls: Any, response_cls: Any, version: int, body: dict[str, Any],
                   answer: Answer) -> None:
        answer(None)  # there is no other broker

    def delete_topics(self, version: int, names: list[str], timeout_ms: int) -> Reply:
        results: dict[str, tuple[Err, str | None]] = {}
        for name in names:
            metas = self.core.metadata.topics.pop(name, None)
            if metas is None:
                results[name] = (Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
                continue
            for i in metas:
                self.core.remove_partition(TopicPartition(name, i), delete=True)
            self._save_configs({t: c for t, c in self.core.metadata.topic_configs.items() if t != name})
            results[name] = (Err.NONE, None)
        return Reply(version, TopicAdmin.delete_topics_body(results))

    def alter_topic_configs(self, version: int, changes: dict[str, dict[str, str]], body: AlterBody) -> Reply:
        self._save_configs({**self.core.metadata.topic_configs, **changes})
        return Reply(version, body({t: (Err.NONE, None) for t in changes}))

    # --- admin APIs: one broker holds the only replica of everything ---------------------------------
    def _count(self, topic: str) -> int:
        return len(self.core.metadata.topics.get(topic, {}))

    def _only_here(self) -> admin.Outcome:
        me = self.core.config.broker_id
        return Err.INVALID_REPLICA_ASSIGNMENT, f"a standalone broker places replicas only on [{me}]"

    def create_partitions(self, version: int, req: Any) -> Reply:
        me = self.core.config.broker_id
        results: list[tuple[str, admin.Outcome]] = []
        for topic, count, assignments in admin.create_partitions_requests(req):
            have = self._count(topic)
            if not have:
                results.append((topic, (Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist")))
            elif count <= have:
                results.append((topic, (Err.INVALID_PARTITIONS, f"topic {topic!r} has {have} partitions")))
            elif assignments is not None and any(a != [me] for a in assignments):
                results.append((topic, self._only_here()))
            else:
                if not req.validate_only:
                    self.core.create_local_topic(topic, count)
                results.append((topic, (Err.NONE, None)))
        return Reply(version, admin.create_partitions_body(results))

    def elect_leaders(self, version: int, req: Any) -> Reply:
        _, keys = admin.elect_leaders_request(version, req)
        if keys is None:  # every partition: none needs an election, so none is listed
            return Reply(version, admin.elect_leaders_body({}))
        results = {k: (Err.ELECTION_NOT_NEEDED, None) if k[1] < self._count(k[0])
                   else (Err.UNKNOWN_TOPIC_OR_PARTITION, None) for k in keys}
        return Reply(version, admin.elect_leaders_body(results))

    def alter_partition_reassignments(self, version: int, req: Any) -> Reply:
        wanted, allow = admin.reassignment_requests(version, req)
        me = self.core.config.broker_id
        results: dict[tuple[str, int], admin.Outcome] = {}
        for (topic, p), target in wanted.items():
            if p >= self._count(topic):
                results[(topic, p)] = (Err.UNKNOWN_TOPIC_OR_PARTITION, None)
            elif target is None:
                results[(topic, p)] = (Err.NO_REASSIGNMENT_IN_PROGRESS, None)
            elif target != [me]:
                results[(topic, p)] = self._only_here()
            else:
                results[(topic, p)] = (Err.NONE, None)  # already there
        return Reply(version, admin.alter_reassignments_body(results, allow_rf_change=allow))

    def list_partition_reassignments(self, version: int, req: Any) -> Reply:
        return Reply(version, admin.list_reassignments_body({}))


__all__ = ["APIS", "BrokerCore", "Reply", "Standalone", "Path"]
