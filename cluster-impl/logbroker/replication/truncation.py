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
from logbroker.probes import probe

_NO_EPOCH = probe("truncation-leader-knows-no-epoch")
_DIVERGED = probe("truncation-steps-below-diverged-epoch")

Ask = Callable[[int], Awaitable[tuple[int, int]]]  # our epoch -> (leader's epoch <= it, its end offset)


class TruncationSearch:
    """The same rule as a step machine, so a fetcher can ask about many partitions in one request
    per round: `question()` is the epoch to ask the leader about (None once `result` is known), and
    `answer()` takes the leader's reply."""

    def __init__(self, epochs: LeaderEpochCache, leo: int, hw: int) -> None:
        self.epochs, self.leo, self.hw = epochs, leo, hw
        self.point = leo
        self.my_epoch = epochs.latest_epoch
        self.asked: set[int] = set()
        self.result: int | None = None
        self._settle()

    def _settle(self) -> None:
        if self.result is None and (self.my_epoch == UNDEFINED_EPOCH or self.my_epoch in self.asked):
            self.result = self.point

    def question(self) -> int | None:
        return None if self.result is not None else self.my_epoch

    def answer(self, leader_epoch: int, leader_end: int) -> None:
        if self.result is not None:
            return
        self.asked.add(self.my_epoch)
        if leader_epoch == UNDEFINED_EPOCH:
            _NO_EPOCH()
            self.result = min(self.point, self.hw)
            return
        own_epoch, own_end = self.epochs.end_offset_for(leader_epoch, self.leo)
        if own_epoch == UNDEFINED_EPOCH:  # every epoch we have is newer than anything the leader knows
            self.result = min(self.point, leader_end)
            return
        self.point = min(self.point, leader_end, own_end)
        if leader_epoch == self.my_epoch or own_epoch == leader_epoch:
            self.result = self.point
            return
        _DIVERGED()
        self.my_epoch = own_epoch  # our epochs in (L, E] diverged; ask about the one below them
        self._settle()


async def truncation_offset(epochs: LeaderEpochCache, leo: int, hw: int, ask: Ask) -> int:
    search = TruncationSearch(epochs, leo, hw)
    while (epoch := search.question()) is not None:
        search.answer(*await ask(epoch))
    assert search.result is not None
    return search.result
