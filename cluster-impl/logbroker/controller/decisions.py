"""The controller's rules as pure functions, so they can be tested and simulated without I/O."""

from __future__ import annotations

from dataclasses import dataclass


def place_replicas(partitions: int, replication_factor: int, brokers: list[int], start: int = 0) -> dict[int, list[int]]:
    """Seed 001's placement: replica j of partition i on the ((i + j) mod n)-th broker, so leaders
    (replica 0) spread evenly and each partition's replicas sit on distinct brokers."""
    if replication_factor > len(brokers):
        raise ValueError(f"replication factor {replication_factor} > {len(brokers)} live brokers")
    b = sorted(brokers)
    n = len(b)
    return {i: [b[(start + i + j) % n] for j in range(replication_factor)] for i in range(partitions)}


@dataclass(frozen=True, slots=True)
class Election:
    leader: int  # -1: offline
    isr: tuple[int, ...]
    unclean: bool = False


def elect_leader(replicas: list[int], isr: tuple[int, ...], live: set[int], *, unclean_allowed: bool) -> Election:
    """Seed 003 (A): the new leader is the first live replica (in assignment order) that is in the ISR;
    only with unclean election enabled may a live replica outside the ISR take over (and the ISR
    restarts as just that leader); otherwise the partition goes offline."""
    live_isr = [r for r in replicas if r in isr and r in live]
    if live_isr:
        return Election(live_isr[0], tuple(r for r in isr if r in live))
    if unclean_allowed:
        live_any = [r for r in replicas if r in live]
        if live_any:
            return Election(live_any[0], (live_any[0],), unclean=True)
    return Election(-1, tuple(r for r in isr if r in live) or isr)
