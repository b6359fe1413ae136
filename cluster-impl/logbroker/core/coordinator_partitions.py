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

An append this coordinator made survives exactly when the log's epoch cache still says its epoch
spans its offsets (`append_survives`): a truncation as follower, or another leader's records in the
same offsets, ends that epoch's range before them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from logbroker.core.partition import Partition


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


def append_survives(p: Partition, epoch: int, end: int) -> bool:
    """The records this broker appended as leader at `epoch`, ending before offset `end`, are still
    in its log as it leads now (so an HW at or past `end` commits them)."""
    if not p.is_leader():
        return False
    e, end_of_epoch = p.log.epochs.end_offset_for(epoch, p.leo)
    return e == epoch and end_of_epoch >= end
