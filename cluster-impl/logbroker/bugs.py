"""Bug switches: named, off-by-default re-creations of historic replication mistakes.

They exist so the harness can prove that it catches each one (the "detection matrix"). Each switch
must change behaviour only in the situation it concerns; its docstring below names the seed passage
it violates (`../shared/seeds/`). Brokers receive them as `--bug NAME` (repeatable).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Bug(StrEnum):
    #: Follower truncates its log to its own HW when it becomes follower, as before KIP-101
    #: (seed 004, KIP-279 "Motivation"); correct behaviour asks the leader OffsetForLeaderEpoch.
    TRUNCATE_TO_HW = "truncate-to-hw"
    #: acks=all is answered once the leader has written locally, before the ISR has it
    #: (seed 001 "sync replication": a message is committed only when every ISR replica has it).
    ACK_BEFORE_REPLICATION = "ack-before-replication"
    #: The leader shrinks its ISR by itself, without the controller, and advances HW with it,
    #: as before KIP-497 (seed 002: only the controller writes ISR; shrink applies once committed).
    LOCAL_ISR_SHRINK = "local-isr-shrink"
    #: Brokers obey LeaderAndIsr requests and fetches that carry stale leader or controller epochs:
    #: the zombie leader/controller of seed 003's discussion, section 3.
    STALE_EPOCH_ACCEPTED = "stale-epoch-accepted"
    #: The controller ignores that a broker came back without its log directory, keeping it in the ISR
    #: and electing it, and knows no eligible leader replicas: Kafka's ZooKeeper mode (KIP-966 "Motivation").
    LOST_DISK_IN_ISR = "lost-disk-in-isr"


def parse_bugs(names: Iterable[str]) -> frozenset[Bug]:
    """Validate bug names; an unknown one is a ValueError that lists the known ones."""
    out = set()
    for name in names:
        try:
            out.add(Bug(name))
        except ValueError:
            known = ", ".join(b.value for b in Bug)
            raise ValueError(f"unknown bug switch {name!r}; known: {known}") from None
    return frozenset(out)
