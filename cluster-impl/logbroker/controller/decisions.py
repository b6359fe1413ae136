"""The controller's rules as pure functions, so they can be tested and simulated without I/O."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from logbroker.coord.model import PartitionState
from logbroker.protocol.errors import Err

K = TypeVar("K", bound=Hashable)


def place_replicas(partitions: int, replication_factor: int, brokers: list[int], start: int = 0,
                   first: int = 0) -> dict[int, list[int]]:
    """Seed 001's placement: replica j of partition i on the ((i + j) mod n)-th broker, so leaders
    (replica 0) spread evenly and each partition's replicas sit on distinct brokers. `first` is the
    first partition id to place: partitions added later (seed 003 H) continue the same rotation."""
    if replication_factor > len(brokers):
        raise ValueError(f"replication factor {replication_factor} > {len(brokers)} live brokers")
    b = sorted(brokers)
    n = len(b)
    return {i: [b[(start + i + j) % n] for j in range(replication_factor)] for i in range(first, first + partitions)}


@dataclass(frozen=True, slots=True)
class Election:
    leader: int  # -1: offline
    isr: tuple[int, ...]
    unclean: bool = False


def elect_leader(replicas: Sequence[int], isr: tuple[int, ...], live: set[int], *, unclean_allowed: bool,
                 elr: tuple[int, ...] = ()) -> Election:
    """Seed 003 (A): the new leader is the first live replica (in assignment order) that is in the ISR;
    with none, the first live eligible leader replica (KIP-966: it has every committed record, see
    `next_elr`), and the ISR restarts as just that leader; only with unclean election enabled may any
    other live replica take over; otherwise the partition goes offline."""
    live_isr = [r for r in replicas if r in isr and r in live]
    if live_isr:
        return Election(live_isr[0], tuple(r for r in isr if r in live))
    live_elr = [r for r in replicas if r in elr and r in live]
    if live_elr:
        return Election(live_elr[0], (live_elr[0],))
    if unclean_allowed:
        live_any = [r for r in replicas if r in live]
        if live_any:
            return Election(live_any[0], (live_any[0],), unclean=True)
    return Election(-1, tuple(r for r in isr if r in live) or isr)


def next_elr(old_isr: tuple[int, ...], old_elr: tuple[int, ...], new_isr: tuple[int, ...], min_isr: int,
             lost: set[int] | frozenset[int] = frozenset(), *, unclean: bool = False) -> tuple[int, ...]:
    """KIP-966's eligible leader replicas after an ISR change. Nothing is committed while the ISR is
    smaller than min.insync.replicas (acks=all), so a member that leaves the ISR once it is that small,
    or whose leaving makes it so, holds every committed record: it may lead if the ISR dies. Back to
    min.insync.replicas, commits go on without them and none is eligible any more; a broker that lost
    its data never is; an unclean election forgets them all."""
    if unclean or len(new_isr) >= min_isr:
        return ()
    return tuple(sorted((set(old_elr) | set(old_isr)) - set(new_isr) - set(lost)))


class ElectionType(IntEnum):
    """ElectLeaders' `election_type` (the protocol's numbers)."""

    PREFERRED = 0
    UNCLEAN = 1


def requested_election(kind: ElectionType, replicas: Sequence[int], st: PartitionState,
                       live: set[int]) -> tuple[Err, Election | None]:
    """An election an operator asked for (ElectLeaders, or the preferred-election admin path).

    Preferred: move leadership to the first assigned replica — only if it is alive and in the ISR,
    so no committed data can be lost by the move. Unclean: only for a partition without a live
    leader, the first live replica takes over even outside the ISR (the operator accepts loss)."""
    if kind is ElectionType.PREFERRED:
        pref = replicas[0] if replicas else -1
        if st.leader == pref:
            return Err.ELECTION_NOT_NEEDED, None
        if pref not in live or pref not in st.isr:
            return Err.PREFERRED_LEADER_NOT_AVAILABLE, None
        return Err.NONE, Election(pref, tuple(r for r in st.isr if r in live))
    if st.leader in live:
        return Err.ELECTION_NOT_NEEDED, None
    e = elect_leader(replicas, st.isr, live, unclean_allowed=True)
    if e.leader == -1:
        return Err.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return Err.NONE, e


def imbalanced(partitions: Mapping[K, tuple[Sequence[int], PartitionState]], live: set[int],
               percentage: int) -> list[K]:
    """Kafka's automatic leader rebalance rule: for each live broker, the share of the partitions it
    is preferred for but does not lead; above `percentage`, each of those partitions whose preferred
    replica is in the ISR gets a preferred election. Returned in a stable order."""
    by_pref: dict[int, list[K]] = {}
    for k, (replicas, _) in partitions.items():
        if replicas and replicas[0] in live:
            by_pref.setdefault(replicas[0], []).append(k)
    out: list[K] = []
    for broker, keys in sorted(by_pref.items()):
        not_led = [k for k in keys if partitions[k][1].leader != broker]
        if keys and len(not_led) * 100 > percentage * len(keys):
            out += [k for k in not_led if broker in partitions[k][1].isr]
    return out
