"""Which partitions of an internal topic a coordinator has loaded, and whether its state still holds.

The group coordinator (`__consumer_offsets`) and the transaction coordinator
(`__transaction_state`) keep in memory what they read from the partitions they lead, and follow
leadership by looking at each partition's role and leader epoch on every request and tick (there is
no hook in the replica manager). The rules, shared so both fail over the same way:

- a partition led here and not loaded is read from its log (`LOAD`);
- a partition loaded here and no longer led is dropped (`UNLOAD`): its waiters learn
  NOT_COORDINATOR;
- a partition still led here at a NEW leader epoch keeps its state (`KEEP`) when the log shows no
  other leader in between: the controller bumps the leader epoch when it shrinks the ISR of a
  partition whose follower died, and the leader stays. Kafka keeps its loaded groups then
  (`addLoadingPartition` refuses an owned partition); reloading instead threw away every pending
  rebalance and answered every waiting member NOT_COORDINATOR whenever any other broker died.
  Another leader in between shows as an epoch between ours in the leader-epoch cache (every
  leader's records carry its epoch), and then the state is read again (`RELOAD`).

Both write their records as leader and act on them once the partition's HW covers them
(`append_and_wait`, acks=all through the purgatory). An append survives exactly when the log's
epoch cache still says its epoch spans its offsets (`append_survives`): a truncation as follower,
or another leader's records in the same offsets, ends that epoch's range before them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from kafka.record.default_records import DefaultRecordBatchBuilder

from logbroker.core.clock import Clock
from logbroker.core.metadata import MetadataCache
from logbroker.core.partition import Partition, Role, TopicPartition
from logbroker.core.purgatory import Body, Deferred, Purgatory
from logbroker.protocol.errors import Err


class Verdict(Enum):
    NONE = "none"  # not led here, not loaded
    LOAD = "load"  # led here, not loaded: read it
    KEEP = "keep"  # led here and loaded, with no other leader since
    RELOAD = "reload"  # led here, but another leader wrote since it was loaded: drop and read again
    UNLOAD = "unload"  # loaded, not led here any more: drop


@dataclass
class Loaded:
    """One loaded partition: the leader epoch last seen. Its identity marks one load, so a write
    answered after a reload can tell that the state it would update is gone."""

    epoch: int


def foreign_epoch_between(p: Partition, since: int) -> bool:
    """Did some leader other than us write to `p` at an epoch after `since` and before the current
    one? (Epochs this broker led unobserved also count: reading again is never wrong, only slower.)"""
    return any(since < e < p.leader_epoch for e, _ in p.log.epochs.entries)


def judge(p: Partition | None, loaded: Loaded | None) -> Verdict:
    """What to do with partition `p` given its load here (None: not loaded). A KEEP across a new
    leader epoch records that epoch in `loaded`."""
    if p is None or not p.is_leader():
        return Verdict.UNLOAD if loaded is not None else Verdict.NONE
    if loaded is None:
        return Verdict.LOAD
    if loaded.epoch == p.leader_epoch:
        return Verdict.KEEP
    if p.leader_epoch < loaded.epoch or foreign_epoch_between(p, loaded.epoch):
        return Verdict.RELOAD
    loaded.epoch = p.leader_epoch
    return Verdict.KEEP


def follow(p: Partition | None, loaded: dict[int, Loaded], pidx: int, unload: Callable[[int], None],
           load: Callable[[Partition], None]) -> Partition | None:
    """Apply `judge` to partition `pidx` (its replica here, `p`): unload and/or load as it says; the
    partition if this broker leads it now, loaded, else None."""
    verdict = judge(p, loaded.get(pidx))
    if verdict in (Verdict.UNLOAD, Verdict.RELOAD):
        unload(pidx)
    if p is not None and verdict in (Verdict.LOAD, Verdict.RELOAD):
        load(p)
    return p if verdict in (Verdict.LOAD, Verdict.KEEP, Verdict.RELOAD) else None


def append_survives(p: Partition, epoch: int, end: int) -> bool:
    """The records this broker appended as leader at `epoch`, ending before offset `end`, are still
    in its log as it leads now (so an HW at or past `end` commits them)."""
    if not p.is_leader():
        return False
    e, end_of_epoch = p.log.epochs.end_offset_for(epoch, p.leo)
    return e == epoch and end_of_epoch >= end


NO_NODE = (-1, "", -1)
Found = tuple[Err, str | None, tuple[int, str, int]]  # FindCoordinator's answer for one key


def coordinator_node(metadata: MetadataCache, local: Mapping[TopicPartition, Partition], topic: str,
                     place: Callable[[int], int], create: Callable[[], None]) -> Found:
    """FindCoordinator: the leader of the key's partition of `topic`, `place(partition count)`; the
    topic is created on first use, as Kafka does, and COORDINATOR_NOT_AVAILABLE answers until the
    partition has a leader.

    A replica of the partition here knows its leader from the controller's LeaderAndIsr, which
    arrives before the UpdateMetadata that moves the metadata cache: when its leader epoch is at
    least the cache's, its word wins. (A new leader that answered from its cache named the dead
    broker; librdkafka then waited out its reconnect backoff, up to 10 s, before asking again, and
    the transactions of that window timed out.)"""
    metas = metadata.topics.get(topic)
    if metas is None and not metadata.complete:  # a restarted broker before the controller's first view:
        # it cannot tell a missing topic from one it has not heard of yet, and must not create it from
        # a view that holds only itself (Kafka answers COORDINATOR_NOT_AVAILABLE then)
        return Err.COORDINATOR_NOT_AVAILABLE, "this broker has no view of the cluster yet", NO_NODE
    if metas is None:
        create()
        metas = metadata.topics.get(topic)
        if metas is None:
            return Err.COORDINATOR_NOT_AVAILABLE, f"{topic} is being created", NO_NODE
    pidx = place(len(metas))
    m = metas.get(pidx)
    leader = m.leader if m is not None else -1
    here = local.get(TopicPartition(topic, pidx))
    if here is not None and here.role is not Role.NONE and (m is None or here.leader_epoch >= m.leader_epoch):
        leader = here.leader_id
    b = metadata.brokers.get(leader)
    if b is None:
        return Err.COORDINATOR_NOT_AVAILABLE, f"the key's partition of {topic} has no leader", NO_NODE
    return Err.NONE, None, (b.broker_id, b.host, b.port)


class _Replication(Protocol):
    def accepts_produce(self, p: Partition) -> Err: ...

    def on_leader_append(self, p: Partition) -> None: ...


class CoordinatorHost(Protocol):
    """What `append_and_wait` uses of the broker core."""

    @property
    def clock(self) -> Clock: ...

    @property
    def purgatory(self) -> Purgatory: ...

    @property
    def replication(self) -> _Replication: ...


def append_and_wait(host: CoordinatorHost, p: Partition, recs: list[tuple[bytes, bytes]], version: int,
                    timeout_ms: int, on_done: Callable[[Err, int], Body], *,
                    producer: tuple[int, int] | None = None) -> Deferred:
    """Append `recs` (key, value) as one batch as leader; `on_done(err, base offset)` runs once HW
    covers them (NONE), or they are lost (NOT_COORDINATOR), or the ISR is too small or `timeout_ms`
    passes first (COORDINATOR_NOT_AVAILABLE), as Kafka's coordinators answer. `producer` (id, epoch)
    makes it a transactional batch of that producer (TxnOffsetCommit: a marker ends it)."""
    now = host.clock.monotonic_ms()
    if host.replication.accepts_produce(p) != Err.NONE:
        body = on_done(Err.COORDINATOR_NOT_AVAILABLE, -1)
        return Deferred(lambda: True, lambda _t: body, now, version, done=True)
    pid, pepoch = producer if producer is not None else (-1, -1)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(producer is not None),
                                  producer_id=pid, producer_epoch=pepoch,
                                  base_sequence=0 if producer is not None else -1, batch_size=2**31 - 1)
    ts = host.clock.now_ms()
    for i, (k, v) in enumerate(recs):
        b.append(i, timestamp=ts, key=k, value=v, headers=[])
    epoch = p.leader_epoch
    info = p.append_as_leader(bytes(b.build()))
    end = info.last_offset + 1

    def lost() -> bool:
        return not append_survives(p, epoch, end)

    def complete(timed_out: bool) -> Body:
        err = Err.NOT_COORDINATOR if lost() else Err.COORDINATOR_NOT_AVAILABLE if p.hw < end else Err.NONE
        return on_done(err, info.base_offset)

    d = Deferred(lambda: p.hw >= end or lost(), complete, now + timeout_ms, version, frozenset({p.tp}))
    host.replication.on_leader_append(p)
    host.purgatory.check([p.tp])
    return host.purgatory.add(d)
