"""A partition's transaction state: open transactions, the LSO, the aborted-transaction index, producer
snapshots, and how restarts, followers and truncation rebuild them (on real log files, no broker).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from logbroker.core.names import Role
from logbroker.core.partition import Partition, TopicPartition
from logbroker.log import snapshots
from logbroker.log.control import ControlMarker, marker_batch
from logbroker.log.log import Log, LogConfig
from logbroker.log.txn_index import AbortedTxn
from logbroker.protocol.errors import Err


def txn_batch(pid: int, epoch: int, seq: int, n: int = 2, *, transactional: bool = True) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=None, key=None, value=b"v%d" % (seq + i), headers=[])
    return bytes(b.build())


def plain(n: int = 1) -> bytes:
    return txn_batch(-1, -1, -1, n, transactional=False)


def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> bytes:
    return marker_batch(pid, epoch, ControlMarker(commit, coordinator_epoch), 1_700_000_000_000)


def open_partition(d: Path, segment_bytes: int = 64 << 20) -> Partition:
    p = Partition(TopicPartition("t", 0), Log(d, LogConfig(segment_bytes=segment_bytes), lambda: 0), 1)
    p.load_producer_state()
    p.role = Role.LEADER
    p.isr = [1]
    return p


def commit_all(p: Partition) -> None:
    p.hw = p.leo


def test_an_open_transaction_holds_the_lso_until_its_marker_is_below_the_hw(tmp_path: Path) -> None:
    p = open_partition(tmp_path / "p")
    p.append_as_leader(plain(3))  # 0..2, not transactional
    p.append_as_leader(txn_batch(7, 0, 0))  # 3..4 opens producer 7's transaction
    p.append_as_leader(plain())  # 5
    commit_all(p)
    assert p.hw == 6 and p.lso == 3 and p.producers.ongoing == {7: 3}
    p.append_as_leader(txn_batch(7, 0, 2))  # 6..7: the same transaction goes on
    info = p.append_as_leader(marker(7, 0, commit=True))  # the COMMIT at 8
    assert info.base_offset == 8 and p.producers.ongoing == {}
    assert p.lso == 3, "a marker not yet below the HW decides nothing"
    p.hw = 8
    assert p.lso == 3
    p.hw = 9
    assert p.lso == 9 and p.producers.unreplicated == []
    assert p.log.aborted.entries == []


def test_an_abort_is_indexed_and_found_for_every_overlapping_fetch(tmp_path: Path) -> None:
    p = open_partition(tmp_path / "p")
    p.append_as_leader(txn_batch(1, 0, 0))  # 0..1 producer 1
    p.append_as_leader(txn_batch(2, 0, 0))  # 2..3 producer 2
    p.append_as_leader(marker(1, 0, commit=False))  # 4 ABORT 1; producer 2 still open from 2
    p.append_as_leader(plain())  # 5
    p.append_as_leader(marker(2, 0, commit=False))  # 6 ABORT 2
    commit_all(p)
    assert p.log.aborted.entries == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 7)]
    assert [a.producer_id for a in p.log.aborted.collect(0, 7)] == [1, 2]
    assert [a.producer_id for a in p.log.aborted.collect(5, 7)] == [2]
    assert [a.producer_id for a in p.log.aborted.collect(0, 2)] == [1], "producer 2 begins at 2"
    assert p.log.aborted.collect(7, 9) == []


def test_producer_checks_of_transactional_data_and_markers(tmp_path: Path) -> None:
    from logbroker.log.batch import parse_header

    p = open_partition(tmp_path / "p")
    p.append_as_leader(txn_batch(5, 3, 0))
    assert p.producers.check(parse_header(txn_batch(5, 2, 2))).error == Err.INVALID_PRODUCER_EPOCH
    assert p.producers.check(parse_header(txn_batch(5, 3, 2, transactional=False))).error == Err.INVALID_TXN_STATE
    assert p.producers.check(parse_header(txn_batch(5, 3, 2))).error == Err.NONE
    assert p.producers.check_marker(5, 2, 0, strict_epoch=False) == Err.INVALID_PRODUCER_EPOCH
    p.append_as_leader(marker(5, 3, commit=True, coordinator_epoch=4))
    assert p.producers.check_marker(5, 3, 3, strict_epoch=False) == Err.TRANSACTION_COORDINATOR_FENCED
    assert p.producers.check_marker(5, 3, 4, strict_epoch=False) == Err.NONE
    # KIP-890 part 2: a marker with the bumped epoch fences the old epoch's late data
    p.append_as_leader(txn_batch(5, 3, 2))
    assert p.producers.check_marker(5, 3, 4, strict_epoch=True) == Err.INVALID_PRODUCER_EPOCH
    assert p.producers.check_marker(5, 4, 4, strict_epoch=True) == Err.NONE
    p.append_as_leader(marker(5, 4, commit=False, coordinator_epoch=4))
    assert p.producers.check(parse_header(txn_batch(5, 3, 4))).error == Err.INVALID_PRODUCER_EPOCH
    assert p.producers.check(parse_header(txn_batch(5, 4, 0))).error == Err.NONE


def state(p: Partition) -> tuple[object, ...]:
    return (p.producers.to_snapshot(), p.log.aborted.entries, p.leo)


def test_a_restart_restores_the_state_from_its_snapshot_and_replays_only_the_tail(tmp_path: Path) -> None:
    d = tmp_path / "p"
    p = open_partition(d, segment_bytes=300)  # small segments: rolls (and snapshots) happen
    for i in range(40):
        p.append_as_leader(txn_batch(i % 3, 0, (i // 3) * 2))
        if i % 5 == 4:
            p.append_as_leader(marker(i % 3, 0, commit=i % 2 == 0))
    want = state(p)
    assert len(p.log.segments) > 3 and p.producers.ongoing and p.log.aborted.entries
    assert len(list(d.glob("*.snapshot"))) == snapshots.KEEP
    p.log.close()  # a crash: no snapshot at the end, the last one is from a roll

    replayed: list[int] = []
    original = Log.batches_from

    def counting(self: Log, offset: int):  # type: ignore[no-untyped-def]
        replayed.append(offset)
        yield from original(self, offset)

    Log.batches_from = counting  # type: ignore[method-assign]
    try:
        q = open_partition(d, segment_bytes=300)
    finally:
        Log.batches_from = original  # type: ignore[method-assign]
    assert state(q) == want
    assert replayed and replayed[0] >= q.log.segments[-1].base_offset, "the replay starts at the latest snapshot"
    q.snapshot()  # a clean close
    q.log.close()
    r = open_partition(d, segment_bytes=300)
    assert state(r) == want


def test_a_lost_index_entry_is_rebuilt_and_a_torn_one_dropped(tmp_path: Path) -> None:
    d = tmp_path / "p"
    p = open_partition(d)
    p.append_as_leader(txn_batch(1, 0, 0))
    p.append_as_leader(marker(1, 0, commit=False))
    want = list(p.log.aborted.entries)
    p.log.close()
    index = d / "aborted-txn-index"
    index.write_bytes(index.read_bytes()[:-5])  # a torn last entry
    q = open_partition(d)
    assert q.log.aborted.entries == want and index.stat().st_size == 32


def test_truncation_reopens_a_transaction_whose_marker_it_cuts(tmp_path: Path) -> None:
    p = open_partition(tmp_path / "p")
    p.append_as_leader(plain(2))  # 0..1
    p.append_as_leader(txn_batch(9, 0, 0))  # 2..3
    p.snapshot()  # a snapshot inside the transaction (at 4)
    p.append_as_leader(marker(9, 0, commit=False))  # 4
    p.append_as_leader(txn_batch(9, 0, 2))  # 5..6: a new transaction
    assert p.producers.ongoing == {9: 5} and len(p.log.aborted.entries) == 1
    p.truncate_to(4)
    assert p.leo == 4 and p.producers.ongoing == {9: 2} and p.log.aborted.entries == []
    p.hw = 4
    assert p.lso == 2
    p.truncate_to(1)  # below the snapshot: from the start (the straddling batch 0..1 goes whole)
    assert p.leo == 0 and p.producers.ongoing == {} and list(p.log.dir.glob("*.snapshot")) == []


def test_a_follower_rebuilds_the_leaders_state_from_replicated_batches(tmp_path: Path) -> None:
    leader = open_partition(tmp_path / "leader")
    follower = open_partition(tmp_path / "follower")
    follower.role = Role.FOLLOWER
    leader.append_as_leader(txn_batch(3, 1, 0))
    leader.append_as_leader(txn_batch(4, 0, 0))
    leader.append_as_leader(marker(3, 1, commit=False, coordinator_epoch=2))
    for _, raw in leader.log.batches():
        follower.append_as_follower(raw)
    assert state(follower) == state(leader)
    assert follower.producers.ongoing == {4: 2}
    follower.role = Role.LEADER  # becomes leader: knows the open transaction and where it begins
    follower.hw = follower.leo
    assert follower.lso == 2
    assert follower.producers.check_marker(3, 1, 1, strict_epoch=False) == Err.TRANSACTION_COORDINATOR_FENCED


@pytest.mark.parametrize("bug", [False, True])
def test_lso_ignores_open_transactions_switch(tmp_path: Path, bug: bool) -> None:
    p = open_partition(tmp_path / "p")
    p.lso_is_hw = bug
    p.append_as_leader(txn_batch(1, 0, 0))
    commit_all(p)
    assert p.lso == (2 if bug else 0)
