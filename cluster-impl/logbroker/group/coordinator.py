"""The group coordinator: group requests, `__consumer_offsets` loading, and its acks=all writes.

This broker coordinates the groups whose partition of `__consumer_offsets` it leads. Ownership is
checked on every request and every tick against the partition's role and leader epoch (no hook in
the replica manager is needed; the rules, shared with the transaction coordinator, are in
`core/coordinator_partitions.py`): a partition newly led here is read from the start of its log,
the last record of each key winning; one still led here at a new epoch keeps its groups unless
another leader wrote in between; a partition no longer led here is unloaded, and whatever waited
on its groups is answered NOT_COORDINATOR, so clients look the coordinator up again.

Writes (offset commits, a generation's group record) are appended as leader and answered when the
partition's HW covers them, through the broker's purgatory like an acks=all produce; the offset
cache changes only then. A write that cannot be made or times out is answered as Kafka does:
NOT_COORDINATOR if leadership moved, COORDINATOR_NOT_AVAILABLE if the ISR is too small or the
HW did not get there within `offsets.commit.timeout.ms`.

The topic is created on the first FindCoordinator, with `offsets.topic.num.partitions` partitions
and `offsets.topic.replication.factor` replicas (1 on a standalone broker); FindCoordinator answers
COORDINATOR_NOT_AVAILABLE while fewer brokers are alive than that, or the partition has no leader.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from kafka.record.default_records import DefaultRecordBatch

from logbroker.core.coordinator_partitions import (
    NO_NODE,
    Found,
    Loaded,
    append_and_wait,
    coordinator_node,
    follow,
)
from logbroker.core.partition import Partition, TopicPartition
from logbroker.core.purgatory import Body, Deferred
from logbroker.core.reply import Reply
from logbroker.group import records
from logbroker.group.host import GroupHost
from logbroker.group.records import OFFSETS_TOPIC, GroupKey, OffsetKey, OffsetValue
from logbroker.group.state import Group, JoinArgs, Waiter
from logbroker.log.control import read_marker
from logbroker.probes import probe
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)
_COMMIT_REBALANCING = probe("group-commit-during-rebalance")
_COMMIT_OLD_GENERATION = probe("group-commit-illegal-generation")
_MOVED_WITH_MEMBERS = probe("group-coordinator-moved-with-members")
_COMMIT_LOST = probe("group-commit-coordinator-lost-in-flight")

SLACK_MS = 5000  # a waiting JoinGroup/SyncGroup answer is given up this long after its group's timeouts


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int
    leader_epoch: int
    metadata: str
    log_offset: int  # where its record is in __consumer_offsets: a later record wins


class GroupCoordinator:
    def __init__(self, core: GroupHost) -> None:
        self.core = core
        self.cfg = core.config
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], Committed]] = {}
        self.loaded: dict[int, Loaded] = {}  # partition of __consumer_offsets → its load
        # transactional offset commits waiting for their transaction's marker: producer id → group →
        # (topic, partition) → the offset (TxnOffsetCommit, KIP-98; TXN-CONTRACT item 2)
        self.txn_offsets: dict[int, dict[str, dict[tuple[str, int], Committed]]] = {}
        self._seq = 0
        # FindCoordinator by key type: 0 groups here; the core adds 1, transactions (logbroker/txn/)
        self.finders: dict[int, Callable[[str], Found]] = {0: self._group_coordinator}

    def handlers(self) -> dict[int, Callable[[int, Any], Reply]]:
        return {8: self.offset_commit, 9: self.offset_fetch, 10: self.find_coordinator, 11: self.join_group,
                12: self.heartbeat, 13: self.leave_group, 14: self.sync_group, 15: self.describe_groups,
                16: self.list_groups, 28: self.txn_offset_commit}

    def _now(self) -> int:
        return self.core.clock.monotonic_ms()

    # --- ownership ---------------------------------------------------------------------------------
    def _num_partitions(self) -> int:
        return len(self.core.metadata.topics.get(OFFSETS_TOPIC, {})) or self.cfg.offsets_topic_num_partitions

    def _partition_of(self, group: str) -> int:
        return records.partition_for(group, self._num_partitions())

    def _owned(self, pidx: int) -> Partition | None:
        """The partition if this broker leads it, loaded; unloads it if it does not any more."""
        return follow(self.core.partitions.get(TopicPartition(OFFSETS_TOPIC, pidx)), self.loaded, pidx, self._unload,
                      self._load)

    def _coordinator_error(self, group: str) -> Err:
        if not group:
            return Err.INVALID_GROUP_ID
        return Err.NONE if self._owned(self._partition_of(group)) is not None else Err.NOT_COORDINATOR

    def _load(self, p: Partition) -> None:
        """Replay the partition: the last record of each key wins; a transactional offset commit waits
        for its producer's marker further on (COMMIT applies it, ABORT drops it; none: still pending)."""
        snaps: dict[str, dict[str, Any]] = {}
        n = 0
        for h, raw in p.log.batches():
            if h.is_control:
                marker = read_marker(raw, h)
                if marker is not None:
                    self._txn_ended(h.producer_id, marker.commit, {p.tp.partition})
                continue
            for rec in DefaultRecordBatch(bytes(raw)):
                got = records.decode(rec.key, rec.value)
                n += 1
                if got is None:
                    continue
                key, value = got
                if isinstance(key, OffsetKey) and h.is_transactional:
                    self._pend(h.producer_id, key, value, rec.offset)
                elif isinstance(key, OffsetKey):
                    self._remember(key, value, rec.offset)
                elif isinstance(key, GroupKey):
                    snaps[key.group] = value
        now = self._now()
        for gid, snap in snaps.items():
            self.groups[gid] = Group.restore(gid, snap, now, self.cfg.group_initial_rebalance_delay_ms)
        self.loaded[p.tp.partition] = Loaded(p.leader_epoch)
        log.info("%s: loaded %d records (%d groups) as leader at epoch %d", p.tp, n, len(snaps), p.leader_epoch)

    def _remember(self, key: OffsetKey, value: OffsetValue, log_offset: int) -> None:
        offs = self.offsets.setdefault(key.group, {})
        old = offs.get((key.topic, key.partition))
        if old is None or old.log_offset < log_offset:
            offs[(key.topic, key.partition)] = Committed(value.offset, value.leader_epoch, value.metadata, log_offset)

    def _pend(self, producer_id: int, key: OffsetKey, value: OffsetValue, log_offset: int) -> None:
        self.txn_offsets.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = \
            Committed(value.offset, value.leader_epoch, value.metadata, log_offset)

    def _txn_ended(self, producer_id: int, commit: bool, pidxs: set[int]) -> None:
        """A marker of `producer_id` on partitions `pidxs` of __consumer_offsets: its pending offsets
        for the groups living there become committed offsets (COMMIT) or are dropped (ABORT). A later
        plain commit of the same partition still wins over an earlier transactional one: the record
        further along the log wins, as Kafka compares their offsets."""
        groups = self.txn_offsets.get(producer_id)
        if not groups:
            return
        n = self._num_partitions()
        for gid in [g for g in groups if records.partition_for(g, n) in pidxs]:
            for (t, i), c in groups.pop(gid).items():
                if commit:
                    self._remember(OffsetKey(gid, t, i), OffsetValue(c.offset, c.leader_epoch, c.metadata, 0),
                                   c.log_offset)
        if not groups:
            del self.txn_offsets[producer_id]

    def on_control_batch(self, tp: TopicPartition, producer_id: int, producer_epoch: int, commit: bool,
                         offset: int) -> None:
        """The core's control-batch hook (`core/control_hook.py`): a marker replicated on a partition
        this broker leads. Only `__consumer_offsets` partitions loaded here matter; a second
        announcement finds nothing pending and does nothing."""
        if tp.topic == OFFSETS_TOPIC and tp.partition in self.loaded:
            self._txn_ended(producer_id, commit, {tp.partition})

    def _unload(self, pidx: int) -> None:
        self.loaded.pop(pidx, None)
        n = self._num_partitions()
        gone = [g for g in self.groups if records.partition_for(g, n) == pidx]
        for gid in gone:
            for m in self.groups.pop(gid).members.values():
                for w in (m.join, m.sync):
                    if w is not None:
                        _MOVED_WITH_MEMBERS()
                        w.fail(Err.NOT_COORDINATOR, member_id=m.member_id)
        for gid in [g for g in self.offsets if records.partition_for(g, n) == pidx]:
            del self.offsets[gid]
        for pid, groups in list(self.txn_offsets.items()):
            for gid in [g for g in groups if records.partition_for(g, n) == pidx]:
                del groups[gid]
            if not groups:
                del self.txn_offsets[pid]
        self.core.purgatory.check([_key(g) for g in gone])
        log.info("%s-%d: unloaded %d groups", OFFSETS_TOPIC, pidx, len(gone))

    def tick(self) -> None:
        """Timers: unload partitions led elsewhere now, expire sessions, end rebalances."""
        for pidx in list(self.loaded):
            self._owned(pidx)
        now = self._now()
        for g in list(self.groups.values()):
            g.tick(now)
            self._after(g)
        if self.groups:
            self.core.purgatory.check([_key(g) for g in self.groups])

    # --- writes --------------------------------------------------------------------------------------
    def _append(self, p: Partition, recs: list[tuple[bytes, bytes]], version: int,
                on_done: Callable[[Err, int], Body], producer: tuple[int, int] | None = None) -> Deferred:
        return append_and_wait(self.core, p, recs, version, self.cfg.offsets_commit_timeout_ms, on_done,
                               producer=producer)

    def _after(self, g: Group) -> None:
        """Write the group's record if the state machine asked for it."""
        if not g.write_wanted:
            return
        g.write_wanted = False
        gen, replaced = g.generation, tuple(g.replacing)
        p = self._owned(self._partition_of(g.group_id))

        def done(err: Err, _base: int) -> Body:
            g.written(self._now(), gen, err, replaced)
            self.core.purgatory.check([_key(g.group_id)])
            return {}

        if p is None:
            done(Err.NOT_COORDINATOR, -1)
        else:
            self._append(p, [records.group_record(g.group_id, g.snapshot())], 0, done)

    def _wait(self, version: int, w: Waiter, group: str, wait_ms: int,
              body: Callable[[dict[str, Any]], Body]) -> Reply:

        if w.result is not None:
            return Reply(version, body(w.result))

        def complete(timed_out: bool) -> Body:
            return body(w.result if w.result is not None else {"error_code": int(Err.REBALANCE_IN_PROGRESS)})

        d = Deferred(lambda: w.result is not None, complete, self._now() + wait_ms + SLACK_MS, version,
                     frozenset({_key(group)}))
        return Reply(version, deferred=self.core.purgatory.add(d))

    def _new_member_id(self, client_id: str) -> str:
        """Unique across coordinators and restarts: broker id, a counter, and the monotonic clock."""
        self._seq += 1
        return f"{client_id}-{self.cfg.broker_id}.{self._seq}-{self._now()}"

    # --- FindCoordinator ---------------------------------------------------------------------------
    def find_coordinator(self, version: int, req: Any) -> Reply:

        key_type = req.key_type if version >= 1 else 0
        keys = list(req.coordinator_keys) if version >= 4 else [req.key]
        found = []
        for key in keys:
            finder = self.finders.get(key_type)
            err, msg, node = finder(key) if finder is not None else (
                Err.INVALID_REQUEST, f"no coordinator of key type {key_type}", NO_NODE)
            found.append({"key": key, "node_id": node[0], "host": node[1], "port": node[2], "error_code": int(err),
                          "error_message": msg})
        if version >= 4:
            return Reply(version, {"throttle_time_ms": 0, "coordinators": found})
        one = dict(found[0])
        del one["key"]
        return Reply(version, {"throttle_time_ms": 0, **one})

    def _group_coordinator(self, key: str) -> Found:
        if not key:
            return Err.INVALID_GROUP_ID, "empty group id", NO_NODE
        return coordinator_node(self.core.metadata, self.core.partitions, OFFSETS_TOPIC,
                                lambda n: records.partition_for(key, n),
                                self._create_offsets_topic)

    def _create_offsets_topic(self) -> None:
        rf = 1 if self.cfg.standalone else self.cfg.offsets_topic_replication_factor
        if rf > len(self.core.metadata.brokers):
            log.warning("%s needs %d live brokers, %d are", OFFSETS_TOPIC, rf, len(self.core.metadata.brokers))
            return
        err = self.core.replication.create_topic(OFFSETS_TOPIC, self.cfg.offsets_topic_num_partitions, rf, {})
        if err not in (Err.NONE, Err.TOPIC_ALREADY_EXISTS):
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, err.name)

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------
    def join_group(self, version: int, req: Any) -> Reply:

        def body(r: dict[str, Any]) -> Body:
            return {"throttle_time_ms": 0, "error_code": r["error_code"], "generation_id": r.get("generation_id", -1),
                    "protocol_type": g.protocol_type if g is not None and r["error_code"] == 0 else None,
                    "protocol_name": r.get("protocol_name") or "", "leader": r.get("leader", ""),
                    "member_id": r.get("member_id", req.member_id), "members": r.get("members", [])}

        gid = req.group_id
        err = self._coordinator_error(gid)
        if err == Err.NONE and not (self.cfg.group_min_session_timeout_ms <= req.session_timeout_ms
                                    <= self.cfg.group_max_session_timeout_ms):
            err = Err.INVALID_SESSION_TIMEOUT
        g = self.groups.get(gid)
        if err == Err.NONE and g is None and req.member_id:
            err = Err.UNKNOWN_MEMBER_ID
        if err != Err.NONE:
            return Reply(version, body({"error_code": int(err)}))
        if g is None:
            g = self.groups[gid] = Group(gid, self.cfg.group_initial_rebalance_delay_ms)
        rebalance_ms = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
        a = JoinArgs(req.member_id, req.header.client_id or "", self.core.client_host, req.session_timeout_ms,
                     rebalance_ms, req.protocol_type, tuple((p.name, bytes(p.metadata)) for p in req.protocols),
                     require_known_member_id=version >= 4, instance_id=req.group_instance_id if version >= 5 else None)
        w = g.join(self._now(), a, self._new_member_id)
        self._after(g)
        self.core.purgatory.check([_key(gid)])
        return self._wait(version, w, gid, max(rebalance_ms, self.cfg.group_initial_rebalance_delay_ms), body)

    def sync_group(self, version: int, req: Any) -> Reply:

        gid = req.group_id
        err = self._coordinator_error(gid)
        g = self.groups.get(gid)

        def body(r: dict[str, Any]) -> Body:
            out: Body = {"throttle_time_ms": 0, "error_code": r["error_code"], "assignment": r.get("assignment", b"")}
            if version >= 5:  # the group's protocol, so the client can check it is the one it chose
                ok = r["error_code"] == 0 and g is not None
                out |= {"protocol_type": g.protocol_type if ok and g else None,
                        "protocol_name": g.protocol if ok and g else None}
            return out

        if err == Err.NONE and g is None:
            err = Err.UNKNOWN_MEMBER_ID
        if err != Err.NONE or g is None:
            return Reply(version, body({"error_code": int(err)}))
        w = g.sync(self._now(), req.member_id, req.generation_id,
                   {a.member_id: bytes(a.assignment) for a in req.assignments},
                   req.group_instance_id if version >= 3 else None,
                   req.protocol_type if version >= 5 else None, req.protocol_name if version >= 5 else None)
        self._after(g)
        self.core.purgatory.check([_key(gid)])
        m = g.members.get(req.member_id)
        return self._wait(version, w, gid, m.session_timeout_ms if m else 0, body)

    def heartbeat(self, version: int, req: Any) -> Reply:

        err = self._coordinator_error(req.group_id)
        if err == Err.NONE:
            g = self.groups.get(req.group_id)
            err = g.heartbeat(self._now(), req.member_id, req.generation_id,
                              req.group_instance_id if version >= 3 else None) if g else Err.UNKNOWN_MEMBER_ID
        return Reply(version, {"throttle_time_ms": 0, "error_code": int(err)})

    def leave_group(self, version: int, req: Any) -> Reply:
        """v0-2: one member by id; v3+: a batch, each by member id and/or group.instance.id, each with
        its own error (the top-level error only for the coordinator itself), as Kafka answers."""
        leaving = [(m.member_id, m.group_instance_id) for m in req.members] if version >= 3 else \
            [(req.member_id, None)]
        err = self._coordinator_error(req.group_id)
        errors: list[Err] = []
        if err == Err.NONE:
            g = self.groups.get(req.group_id)
            errors = [g.leave(self._now(), mid, iid) if g else Err.UNKNOWN_MEMBER_ID for mid, iid in leaving]
            if g is not None:
                self._after(g)
                self.core.purgatory.check([_key(req.group_id)])
        if version < 3:
            return Reply(version, {"throttle_time_ms": 0, "error_code": int(err if err != Err.NONE else errors[0])})
        return Reply(version, {"throttle_time_ms": 0, "error_code": int(err), "members": [
            {"member_id": mid, "group_instance_id": iid, "error_code": int(e)}
            for (mid, iid), e in zip(leaving, errors, strict=False)]})

    # --- OffsetCommit, OffsetFetch -------------------------------------------------------------------
    def offset_commit(self, version: int, req: Any) -> Reply:
        asked = [(t.name, pp.partition_index, pp.committed_offset,
                  pp.committed_leader_epoch if version >= 6 else -1, pp.committed_metadata or "")
                 for t in req.topics for pp in t.partitions]
        generation = req.generation_id_or_member_epoch if version >= 1 else -1
        member = req.member_id if version >= 1 else ""
        return self._commit(version, req.group_id, asked, generation, member,
                            req.group_instance_id if version >= 7 else None, None)

    def txn_offset_commit(self, version: int, req: Any) -> Reply:
        """TxnOffsetCommit (28): the offsets are written as a transactional batch of the producer and
        stay pending until its transaction's marker reaches this partition (`on_control_batch`).
        v3+ carries the member's generation, checked as OffsetCommit's (KIP-447); before, none is."""
        asked = [(t.name, pp.partition_index, pp.committed_offset,
                  pp.committed_leader_epoch if version >= 2 else -1, pp.committed_metadata or "")
                 for t in req.topics for pp in t.partitions]
        generation = req.generation_id if version >= 3 else -1
        member = req.member_id if version >= 3 else ""
        return self._commit(version, req.group_id, asked, generation, member,
                            req.group_instance_id if version >= 3 else None, (req.producer_id, req.producer_epoch))

    def _commit(self, version: int, gid: str, asked: list[tuple[str, int, int, int, str]], generation: int,
                member: str, instance: str | None, producer: tuple[int, int] | None) -> Reply:
        """OffsetCommit, or with `producer` (id, epoch) TxnOffsetCommit."""
        errors: dict[tuple[str, int], Err] = {}

        def body() -> Body:
            out: dict[str, list[dict[str, Any]]] = {}
            for t, i, *_ in asked:
                out.setdefault(t, []).append({"partition_index": i, "error_code": int(errors[(t, i)])})
            return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in out.items()]}

        err = self._coordinator_error(gid)
        g = self.groups.get(gid)
        if err == Err.NONE:
            if g is None and generation < 0:
                g = self.groups[gid] = Group(gid, self.cfg.group_initial_rebalance_delay_ms)
            if producer is not None and generation < 0 and not member and instance is None:
                err = Err.NONE  # as Kafka: a transactional commit without member information is not checked
            else:
                err = g.may_commit(self._now(), member, generation, instance) if g is not None \
                    else Err.ILLEGAL_GENERATION
                if err == Err.REBALANCE_IN_PROGRESS:
                    _COMMIT_REBALANCING()
                elif err in (Err.ILLEGAL_GENERATION, Err.UNKNOWN_MEMBER_ID):
                    _COMMIT_OLD_GENERATION()
        p = self._owned(self._partition_of(gid)) if err == Err.NONE else None
        if p is not None and producer is not None:
            err = self._producer_error(p, *producer)
        if err != Err.NONE:
            errors.update({(t, i): err for t, i, *_ in asked})
            return Reply(version, body())
        recs: list[tuple[bytes, bytes]] = []
        written: list[tuple[OffsetKey, OffsetValue]] = []
        for t, i, off, epoch, meta in asked:
            if len(meta.encode()) > self.cfg.offset_metadata_max_bytes:
                errors[(t, i)] = Err.OFFSET_METADATA_TOO_LARGE
                continue
            if i not in self.core.metadata.topics.get(t, {}):  # as Kafka: no offsets of partitions that are not
                errors[(t, i)] = Err.UNKNOWN_TOPIC_OR_PARTITION
                continue
            k, v = OffsetKey(gid, t, i), OffsetValue(off, epoch, meta, self.core.clock.now_ms())
            written.append((k, v))
            recs.append(records.offset_record(k, v))
        if not recs or p is None:
            return Reply(version, body())
        pidx, load = p.tp.partition, self.loaded.get(p.tp.partition)

        def done(err: Err, base: int) -> Body:
            if self.loaded.get(pidx) is not load:
                _COMMIT_LOST()
            if err == Err.NONE and self.loaded.get(pidx) is load:
                for n, (k, v) in enumerate(written):
                    if producer is None:
                        self._remember(k, v, base + n)
                    else:
                        self._pend(producer[0], k, v, base + n)
            for k, _ in written:
                errors[(k.topic, k.partition)] = err
            return body()

        return Reply(version, deferred=self._append(p, recs, version, done, producer))

    @staticmethod
    def _producer_error(p: Partition, producer_id: int, producer_epoch: int) -> Err:
        """A transactional commit of an epoch older than the producer's at this partition is fenced
        (Kafka's append validates it as any transactional write)."""
        e = p.producers.producers.get(producer_id)
        return Err.INVALID_PRODUCER_EPOCH if e is not None and producer_epoch < e.epoch else Err.NONE

    def offset_fetch(self, version: int, req: Any) -> Reply:

        gid = req.group_id
        err = self._coordinator_error(gid)
        wanted: list[tuple[str, list[int]]]
        offs = self.offsets.get(gid, {})
        if req.topics is None:
            by_topic: dict[str, list[int]] = {}
            for t, i in sorted(offs):
                by_topic.setdefault(t, []).append(i)
            wanted = list(by_topic.items())
        else:
            wanted = [(t.name, list(t.partition_indexes)) for t in req.topics]
        if err != Err.NONE and version >= 2:
            return Reply(version, {"throttle_time_ms": 0, "error_code": int(err), "topics": []})
        unstable = self._pending_txn_offsets(gid) if version >= 7 and req.require_stable else set()
        topics = []
        for t, idxs in wanted:
            parts = []
            for i in idxs:
                c = offs.get((t, i)) if err == Err.NONE and (t, i) not in unstable else None
                e = Err.UNSTABLE_OFFSET_COMMIT if (t, i) in unstable else err  # KIP-447: ask again later
                parts.append({"partition_index": i, "committed_offset": c.offset if c else -1,
                              "committed_leader_epoch": c.leader_epoch if c else -1,
                              "metadata": c.metadata if c else "", "error_code": int(e)})
            topics.append({"name": t, "partitions": parts})
        return Reply(version, {"throttle_time_ms": 0, "error_code": 0, "topics": topics})

    def _pending_txn_offsets(self, gid: str) -> set[tuple[str, int]]:
        return {tp for groups in self.txn_offsets.values() for tp in groups.get(gid, {})}

    # --- ListGroups, DescribeGroups ------------------------------------------------------------------
    def list_groups(self, version: int, req: Any) -> Reply:

        for pidx in list(self.loaded):
            self._owned(pidx)
        states = {s.lower() for s in req.states_filter} if version >= 4 and req.states_filter else None
        listed = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value}
                  for g in self.groups.values() if states is None or g.state.value.lower() in states]
        return Reply(version, {"throttle_time_ms": 0, "error_code": 0, "groups": listed})

    def describe_groups(self, version: int, req: Any) -> Reply:

        out = []
        for gid in req.groups:
            err = self._coordinator_error(gid)
            g = self.groups.get(gid) if err == Err.NONE else None
            # authorized_operations is left to the codec's default (-2^31: not known)
            d: dict[str, Any] = {"error_code": int(err), "group_id": gid, "group_state": "", "protocol_type": "",
                                 "protocol_data": "", "members": []}
            if err == Err.NONE:
                d["group_state"] = g.state.value if g is not None else "Dead"
            if g is not None:
                d.update(protocol_type=g.protocol_type or "", protocol_data=g.protocol or "", members=[
                    {"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                     "client_host": m.client_host, "member_metadata": m.metadata(g.protocol),
                     "member_assignment": m.assignment} for m in g.members.values()])
            out.append(d)
        return Reply(version, {"throttle_time_ms": 0, "groups": out})


def _key(group: str) -> Hashable:
    """The purgatory key of a group's waiting JoinGroup/SyncGroup answers."""
    return ("group", group)
