"""The three scenarios of seed 004 (KIP-279) on real logs, driven through the production truncation
rule; and the same with the `truncate-to-hw` bug (the pre-KIP-101 rule), which loses or diverges data.

A `Replica` is a real `Log` plus its high watermark; "ask the leader" calls the leader's real epoch
cache. This is the sans-IO core the broker runs, without sockets or ZooKeeper.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from logbroker.log.log import Log, LogConfig
from logbroker.replication.truncation import truncation_offset
from rawclient import batch


class Replica:
    def __init__(self, d: Path) -> None:
        self.log = Log(d, LogConfig(), lambda: 0)
        self.hw = 0

    def write(self, epoch: int, values: list[int]) -> None:
        self.log.append_as_leader(batch([str(v).encode() for v in values]), epoch)

    def values(self) -> list[tuple[int, int]]:
        from kafka.record.default_records import DefaultRecordBatch

        return [(r.offset, int(r.value)) for _, raw in self.log.batches() for r in DefaultRecordBatch(bytes(raw))]

    def become_follower_of(self, leader: Replica, *, bug_truncate_to_hw: bool) -> None:
        async def ask(epoch: int) -> tuple[int, int]:
            return leader.log.epochs.end_offset_for(epoch, leader.log.leo)

        if bug_truncate_to_hw:
            cut = self.hw
        else:
            cut = asyncio.run(truncation_offset(self.log.epochs, self.log.leo, self.hw, ask))
        self.log.truncate_to(cut)
        self.hw = min(self.hw, self.log.leo)
        while self.log.leo < leader.log.leo:  # fetch until caught up
            self.log.append_as_follower(leader.log.read(self.log.leo, 1 << 20))
        self.hw = leader.hw


@pytest.fixture
def ab(tmp_path: Path) -> tuple[Replica, Replica]:
    return Replica(tmp_path / "a"), Replica(tmp_path / "b")


def test_scenario_1_follower_drops_the_epoch_the_leader_never_had(ab: tuple[Replica, Replica]) -> None:
    a, b = ab
    for r in (a, b):
        r.write(1, list(range(0, 11)))
    a.write(1, list(range(11, 21)))
    b.write(2, list(range(100, 115)))  # B led briefly at epoch 2: [11, 25]
    a.write(3, list(range(21, 31)))  # A leads at epoch 3
    a.hw = 31
    b.become_follower_of(a, bug_truncate_to_hw=False)
    assert b.log.epochs.entries == a.log.epochs.entries
    assert b.values() == a.values(), "KIP-279: B truncates to 11 (not 21) and copies A"


@pytest.mark.parametrize("bug", [False, True], ids=["kip-101", "truncate-to-hw"])
def test_scenario_2_double_failover(ab: tuple[Replica, Replica], bug: bool) -> None:
    """KIP-101's first scenario: A restarts with HW 11 while B (leader) has committed up to 21."""
    a, b = ab
    for r in (a, b):
        r.write(1, list(range(0, 11)))  # batch 0: offsets [0, 10]
        r.write(1, list(range(11, 21)))  # batch 1: offsets [11, 20]
    a.hw, b.hw = 11, 21
    committed = b.values()  # B's HW is 21: all 21 records are acknowledged
    a.become_follower_of(b, bug_truncate_to_hw=bug) if not bug else _restart_without_catching_up(a)
    # B dies before A catches up; A becomes leader at epoch 2 and takes a new write
    a.write(2, [999])
    a.hw = a.log.leo
    b.become_follower_of(a, bug_truncate_to_hw=bug)
    final = a.values()
    if not bug:
        assert a.values() == b.values()
        assert set(committed) <= set(final), "every committed record survives"
    else:
        lost = set(committed) - set(final)
        diverged = a.values() != b.values()
        assert lost or diverged, "the pre-KIP-101 rule must lose or diverge committed data here"
        assert lost == {(o, o) for o in range(11, 21)}, "A's restart dropped committed [11, 20]"


def _restart_without_catching_up(a: Replica) -> None:
    """Pre-KIP-101 restart: truncate to the local HW before fetching anything."""
    a.log.truncate_to(a.hw)


def test_scenario_3_fast_failover_with_unclean_election(ab: tuple[Replica, Replica]) -> None:
    """Seed 004 scenario 3, with the HWs it states (A's is 0 at step 5): A asks about epoch 2, B says
    epoch 1 ends at 1; A cuts there and asks about epoch 0, which B never had, so A falls back to its
    HW and copies B."""
    a, b = ab
    a.write(0, [1])  # 1. A:0 at epoch 0, then A stops
    b.write(1, [2])  # 2. B leads at epoch 1: B:0, then B stops
    a.write(2, [3])  # 3. A leads at epoch 2: A:1, then A stops
    b.write(3, [4])  # 4. B leads at epoch 3: B:1
    a.hw, b.hw = 0, 2
    a.become_follower_of(b, bug_truncate_to_hw=False)  # 5. A comes back as B's follower
    assert a.values() == b.values() == [(0, 2), (1, 4)]
    assert a.log.epochs.entries == b.log.epochs.entries
