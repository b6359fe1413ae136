"""`BrokerCore`: handles decoded Kafka requests against local partitions; sans-IO.

`handle(api_key, version, request)` returns a `Reply`: a response body now, nothing (acks=0), or a
`Deferred` the purgatory completes later. The server adapter owns sockets and timers and calls
`tick()`; the core never blocks, sleeps or reads the wall clock except through its `Clock`.

Replication (cluster-impl II) plugs in through `self.replication`, an object with hooks for
follower fetches and ISR checks; in standalone mode it is `Standalone`, which makes this broker the
leader of everything with ISR = {self}.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from logbroker.config import BrokerConfig
from logbroker.core import admin
from logbroker.core.clock import Clock
from logbroker.core.metadata import BrokerEndpoint, MetadataCache, PartitionMeta
from logbroker.core.partition import Partition, Role, TopicPartition
from logbroker.core.producer_id import ProducerIdAllocator
from logbroker.core.purgatory import Body, Deferred, Purgatory
from logbroker.log.batch import CorruptBatch, iter_batches
from logbroker.log.log import Log, LogConfig
from logbroker.protocol.apis import APIS, api_versions_body
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)

TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
LATEST, EARLIEST = -1, -2


@dataclass(frozen=True, slots=True)
class Reply:
    version: int
    body: Body | None = None  # None with deferred=None: no response at all (acks=0)
    deferred: Deferred | None = None


class Replication(Protocol):
    """What the core asks of the replication layer (standalone: trivial answers)."""

    def on_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None: ...

    def on_leader_append(self, p: Partition) -> None: ...

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> Err: ...

    def accepts_produce(self, p: Partition) -> Err: ...

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
        self.log_config = LogConfig(config.flush_messages, config.flush_ms, config.segment_bytes)
        self.producer_ids = ProducerIdAllocator(config.log_dirs / "producer-id-block", config.broker_id)
        self.metadata.brokers[config.broker_id] = BrokerEndpoint(config.broker_id, config.advertised_host,
                                                                 config.advertised_port)
        self.replication: Replication = Standalone(self)
        self.handlers: dict[int, Callable[[int, Any], Reply]] = {
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: self.metadata_request,
            18: self.api_versions,
            19: self.create_topics,
            22: self.init_producer_id,
            37: lambda v, r: self.replication.create_partitions(v, r),
            43: lambda v, r: self.replication.elect_leaders(v, r),
            45: lambda v, r: self.replication.alter_partition_reassignments(v, r),
            46: lambda v, r: self.replication.list_partition_reassignments(v, r),
        }

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
            lg = Log(self.config.log_dirs / str(tp), self.log_config, self.clock.monotonic_ms)
            p = Partition(tp, lg, self.config.broker_id)
            p.producers.rebuild(lg.recovered_headers)
            lg.recovered_headers = []
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
            p.log.close()

    def tick(self) -> None:
        now = self.clock.monotonic_ms()
        for p in self.partitions.values():
            p.log.maybe_flush()
        self.purgatory.expire(now)

    # --- dispatch ------------------------------------------------------------------------------
    def handle(self, api_key: int, version: int, request: Any) -> Reply:
        return self.handlers[api_key](version, request)

    # --- ApiVersions ---------------------------------------------------------------------------
    def api_versions(self, version: int, request: Any) -> Reply:
        return Reply(version, api_versions_body())

    # --- Metadata ------------------------------------------------------------------------------
    def metadata_request(self, version: int, req: Any) -> Reply:
        names: list[str] = sorted(self.metadata.topics) if req.topics is None else [t.name for t in req.topics]
        auto = self.config.auto_create_topics and (version < 4 or bool(req.allow_auto_topic_creation))
        topics = []
        for name in names:
            if name not in self.metadata.topics and auto and TOPIC_RE.match(name):
                self.replication.create_topic(name, self.config.num_partitions, self.config.default_replication_factor)
            parts = self.metadata.topics.get(name)
            if parts is None:
                err = Err.INVALID_TOPIC_EXCEPTION if not TOPIC_RE.match(name) else Err.UNKNOWN_TOPIC_OR_PARTITION
                topics.append({"error_code": int(err), "name": name, "is_internal": False, "partitions": []})
                continue
            topics.append({
                "error_code": 0,
                "name": name,
                "is_internal": False,
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

    # --- CreateTopics --------------------------------------------------------------------------
    def create_topics(self, version: int, req: Any) -> Reply:
        results = []
        for t in req.topics:
            n = t.num_partitions if t.num_partitions > 0 else self.config.num_partitions
            rf = t.replication_factor if t.replication_factor > 0 else self.config.default_replication_factor
            if not TOPIC_RE.match(t.name):
                err, msg = Err.INVALID_TOPIC_EXCEPTION, f"invalid topic name {t.name!r}"
            elif t.name in self.metadata.topics:
                err, msg = Err.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists"
            elif t.assignments:
                err, msg = Err.INVALID_REQUEST, "manual replica assignment is not supported"
            elif req.validate_only:
                err, msg = Err.NONE, None
            else:
                err = self.replication.create_topic(t.name, n, rf)
                msg = None if err == Err.NONE else err.name
            results.append({"name": t.name, "error_code": int(err), "error_message": msg,
                            "num_partitions": n, "replication_factor": rf})
        return Reply(version, {"throttle_time_ms": 0, "topics": results})

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
        p.replicas, p.isr = [self.config.broker_id], [self.config.broker_id]
        p.leader_epoch = max(p.leader_epoch, p.log.epochs.latest_epoch, 0)
        p.hw = p.leo

    # --- Produce -------------------------------------------------------------------------------
    def produce(self, version: int, req: Any) -> Reply:
        results: dict[str, list[dict[str, Any]]] = {}
        waits: list[tuple[Partition, int]] = []  # (partition, offset HW must reach)
        acks = req.acks
        if acks not in (-1, 0, 1):
            for t in req.topic_data:
                results[t.name] = [self._produce_result(pd.index, Err.INVALID_REQUEST) for pd in t.partition_data]
            return Reply(version, self._produce_body(results))
        for t in req.topic_data:
            out = results.setdefault(t.name, [])
            for pd in t.partition_data:
                p = self.partitions.get(TopicPartition(t.name, pd.index))
                res, wait = self._produce_partition(p, pd.index, pd.records, acks)
                out.append(res)
                if wait is not None and p is not None:
                    waits.append((p, wait))
        if acks == 0:
            return Reply(version, None)
        early = getattr(self.replication, "produce_complete_early", None)
        if acks == 1 or not waits or (early is not None and early()):
            return Reply(version, self._produce_body(results))
        deadline = self.clock.monotonic_ms() + max(0, req.timeout_ms)

        def ready() -> bool:
            return all(p.hw >= off or not p.is_leader() for p, off in waits)

        def complete(timed_out: bool) -> Body:
            for p, off in waits:
                for r in results[p.tp.topic]:
                    if r["index"] == p.tp.partition and r["error_code"] == 0:
                        if not p.is_leader():
                            r["error_code"] = int(Err.NOT_LEADER_OR_FOLLOWER)
                        elif p.hw < off:
                            r["error_code"] = int(Err.REQUEST_TIMED_OUT)
            return self._produce_body(results)

        return Reply(version, deferred=self.purgatory.add(Deferred(ready, complete, deadline, version)))

    def _produce_partition(self, p: Partition | None, index: int, records: bytes | None,
                           acks: int) -> tuple[dict[str, Any], int | None]:
        if p is None:
            return self._produce_result(index, Err.UNKNOWN_TOPIC_OR_PARTITION), None
        if not p.is_leader():
            return self._produce_result(index, Err.NOT_LEADER_OR_FOLLOWER), None
        if not records:
            return self._produce_result(index, Err.CORRUPT_MESSAGE), None
        if len(records) > self.config.message_max_bytes:
            return self._produce_result(index, Err.MESSAGE_TOO_LARGE), None
        try:
            headers = [h for _, h in iter_batches(records)]
        except CorruptBatch as e:
            log.warning("%s: rejecting corrupt produce: %s", p.tp, e)
            return self._produce_result(index, Err.CORRUPT_MESSAGE), None
        if acks == -1:
            err = self.replication.accepts_produce(p)
            if err != Err.NONE:
                return self._produce_result(index, err), None
        if len(headers) == 1:
            check = p.producers.check(headers[0])
            if check.error != Err.NONE:
                return self._produce_result(index, check.error), None
            if check.duplicate_of is not None:
                base, last = check.duplicate_of
                return self._produce_result(index, Err.NONE, base, p.log.log_start_offset), (last + 1)
        elif any(h.producer_id >= 0 for h in headers):
            return self._produce_result(index, Err.INVALID_REQUEST), None
        info = p.log.append_as_leader(records, p.leader_epoch)
        for h in info.headers:
            p.producers.update(h)
        self.replication.on_leader_append(p)
        self.purgatory.check()
        return self._produce_result(index, Err.NONE, info.base_offset, p.log.log_start_offset), info.last_offset + 1

    @staticmethod
    def _produce_result(index: int, err: Err, base: int = -1, log_start: int = -1) -> dict[str, Any]:
        return {"index": index, "error_code": int(err), "base_offset": base, "log_append_time_ms": -1,
                "log_start_offset": log_start, "record_errors": [], "error_message": None}

    @staticmethod
    def _produce_body(results: dict[str, list[dict[str, Any]]]) -> Body:
        return {"responses": [{"name": n, "partition_responses": r} for n, r in results.items()],
                "throttle_time_ms": 0}

    # --- Fetch ---------------------------------------------------------------------------------
    def fetch(self, version: int, req: Any) -> Reply:
        replica_id = req.replica_id if req.replica_id is not None else -1
        wanted = [(t.topic, fp) for t in req.topics for fp in t.partitions]

        def build(final: bool) -> tuple[Body, int]:
            total = 0
            responses: dict[str, list[dict[str, Any]]] = {}
            for topic, fp in wanted:
                d, n = self._fetch_partition(topic, fp, replica_id, final)
                total += n
                responses.setdefault(topic, []).append(d)
            body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                    "responses": [{"topic": t, "partitions": ps} for t, ps in responses.items()]}
            return body, total

        body, total = build(False)
        if total >= max(1, req.min_bytes) or req.max_wait_ms <= 0 or self._fetch_has_error(body):
            return Reply(version, body)
        deadline = self.clock.monotonic_ms() + req.max_wait_ms

        def ready() -> bool:
            return any(self._fetchable_bytes(topic, fp, replica_id) > 0 for topic, fp in wanted)

        def complete(timed_out: bool) -> Body:
            return build(True)[0]

        return Reply(version, deferred=self.purgatory.add(Deferred(ready, complete, deadline, version)))

    @staticmethod
    def _fetch_has_error(body: Body) -> bool:
        return any(p["error_code"] for t in body["responses"] for p in t["partitions"])

    def _upper_bound(self, p: Partition, replica_id: int) -> int:
        return p.leo if replica_id >= 0 else p.hw

    def _fetchable_bytes(self, topic: str, fp: Any, replica_id: int) -> int:
        p = self.partitions.get(TopicPartition(topic, fp.partition))
        if p is None or not p.is_leader():
            return 1  # an error to report counts as something to answer with
        return max(0, self._upper_bound(p, replica_id) - fp.fetch_offset)

    def _fetch_partition(self, topic: str, fp: Any, replica_id: int, final: bool) -> tuple[dict[str, Any], int]:
        p = self.partitions.get(TopicPartition(topic, fp.partition))
        base = {"partition_index": fp.partition, "high_watermark": -1, "last_stable_offset": -1,
                "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1,
                "records": b""}
        if p is None:
            return {**base, "error_code": int(Err.UNKNOWN_TOPIC_OR_PARTITION)}, 0
        if not p.is_leader():
            return {**base, "error_code": int(Err.NOT_LEADER_OR_FOLLOWER)}, 0
        cle = getattr(fp, "current_leader_epoch", -1)
        if cle is not None and cle >= 0 and cle != p.leader_epoch:
            err = Err.FENCED_LEADER_EPOCH if cle < p.leader_epoch else Err.UNKNOWN_LEADER_EPOCH
            return {**base, "error_code": int(err)}, 0
        if replica_id >= 0:
            self.replication.on_follower_fetch(p, replica_id, fp.fetch_offset)
        ub = self._upper_bound(p, replica_id)
        hdr = {**base, "high_watermark": p.hw, "last_stable_offset": p.hw, "log_start_offset": p.log.log_start_offset}
        if fp.fetch_offset < p.log.log_start_offset or fp.fetch_offset > p.leo:
            return {**hdr, "error_code": int(Err.OFFSET_OUT_OF_RANGE)}, 0
        if fp.fetch_offset >= ub:
            # consumers: an offset between HW and LEO is valid but has nothing committed yet (003 §7)
            return {**hdr, "error_code": 0}, 0
        data = p.log.read(fp.fetch_offset, max(fp.partition_max_bytes, 1), ub)
        return {**hdr, "error_code": 0, "records": data}, len(data)

    # --- ListOffsets ---------------------------------------------------------------------------
    def list_offsets(self, version: int, req: Any) -> Reply:
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
                    if lp.timestamp == LATEST:
                        r["offset"] = p.hw if req.replica_id < 0 else p.leo
                    elif lp.timestamp == EARLIEST:
                        r["offset"] = p.log.log_start_offset
                    else:
                        r["offset"], r["timestamp"] = self._offset_for_time(p, lp.timestamp)
                parts.append(r)
            topics.append({"name": t.name, "partitions": parts})
        return Reply(version, {"throttle_time_ms": 0, "topics": topics})

    @staticmethod
    def _offset_for_time(p: Partition, ts: int) -> tuple[int, int]:
        """First committed record with timestamp >= ts (decodes only the one candidate batch)."""
        from kafka.record.default_records import DefaultRecordBatch

        for h, raw in p.log.batches():
            if h.base_offset >= p.hw:
                break
            if h.max_timestamp >= ts:
                for rec in DefaultRecordBatch(bytes(raw)):
                    if rec.timestamp >= ts and rec.offset < p.hw:
                        return rec.offset, rec.timestamp
        return -1, -1

    # --- InitProducerId ------------------------------------------------------------------------
    def init_producer_id(self, version: int, req: Any) -> Reply:
        if req.transactional_id is not None:
            return Reply(version, {"throttle_time_ms": 0, "error_code": int(Err.INVALID_REQUEST),
                                   "producer_id": -1, "producer_epoch": -1})
        pid = self.producer_ids.next()
        return Reply(version, {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0})


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

    def on_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        return None

    def on_leader_append(self, p: Partition) -> None:
        p.maybe_advance_hw()

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> Err:
        if partitions < 1:
            return Err.INVALID_PARTITIONS
        if replication_factor != 1:
            return Err.INVALID_REPLICATION_FACTOR  # one broker can hold one replica
        self.core.create_local_topic(name, partitions)
        return Err.NONE

    def accepts_produce(self, p: Partition) -> Err:
        if len(p.isr) < self.core.config.min_insync_replicas:
            return Err.NOT_ENOUGH_REPLICAS
        return Err.NONE

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
