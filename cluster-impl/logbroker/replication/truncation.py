"""Where a new follower cuts its log: KIP-101 with KIP-279's fix (seed 004), as a pure function.

The follower asks the leader where its latest epoch E ends. The leader answers with the largest
epoch L <= E it knows and that epoch's end offset. The follower cuts at
min(leader's end offset, the follower's own end of epoch L) — KIP-279's addition, without which a
follower keeps records of an epoch the leader never had (seed 004, scenario 1). If L < E the
follower's epochs above L are gone and it asks again with its next epoch; if the leader knows no
epoch at or below ours, the follower falls back to its high watermark (scenario 3).

Before KIP-101 the follower simply cut at its high watermark; that is the `truncate-to-hw` bug.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from logbroker.log.epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache

Ask = Callable[[int], Awaitable[tuple[int, int]]]  # our epoch -> (leader's epoch <= it, its end offset)


async def truncation_offset(epochs: LeaderEpochCache, leo: int, hw: int, ask: Ask) -> int:
    point = leo
    my_epoch = epochs.latest_epoch
    asked: set[int] = set()
    while my_epoch != UNDEFINED_EPOCH and my_epoch not in asked:
        asked.add(my_epoch)
        leader_epoch, leader_end = await ask(my_epoch)
        if leader_epoch == UNDEFINED_EPOCH:
            return min(point, hw)
        own_epoch, own_end = epochs.end_offset_for(leader_epoch, leo)
        if own_epoch == UNDEFINED_EPOCH:  # every epoch we have is newer than anything the leader knows
            return min(point, leader_end)
        point = min(point, leader_end, own_end)
        if leader_epoch == my_epoch or own_epoch == leader_epoch:
            return point
        my_epoch = own_epoch  # our epochs in (L, E] diverged; ask about the one below them
    return point
