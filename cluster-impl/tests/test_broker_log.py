"""The log on its own: offsets, reads bounded by HW, truncation, segment roll, recovery, epoch cache."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from logbroker.log.epoch_cache import LeaderEpochCache
from logbroker.log.log import Log, LogConfig
from rawclient import batch


def _log(d: Path, **kw: int) -> Log:
    return Log(d, LogConfig(**kw), lambda: 0)


def _values(lg: Log, offset: int = 0, ub: int | None = None) -> list[bytes]:
    """Read like a consumer: one read returns batches of one segment, so keep reading."""
    from kafka.record.default_records import DefaultRecordBatch

    out: list[bytes] = []
    while True:
        data, pos = lg.read(offset, 1 << 30, ub), 0
        if not data:
            return out
        while pos < len(data):
            size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
            b = DefaultRecordBatch(data[pos : pos + size])
            out.extend(r.value for r in b if r.offset >= offset)
            offset = b.next_offset
            pos += size


def test_append_read_truncate_roll_and_recover(tmp_path: Path) -> None:
    lg = _log(tmp_path, segment_bytes=200)
    for i in range(10):
        info = lg.append_as_leader(batch([b"%d" % (2 * i), b"%d" % (2 * i + 1)]), leader_epoch=i // 5)
        assert (info.base_offset, info.last_offset) == (2 * i, 2 * i + 1)
    assert lg.leo == 20 and len(lg.segments) > 1
    assert _values(lg, 0, ub=6) == [b"0", b"1", b"2", b"3", b"4", b"5"]
    assert int.from_bytes(lg.read(7, 1 << 20)[:8], "big") == 6  # a read starts with the batch holding 7
    assert _values(lg, 7)[:2] == [b"7", b"8"]
    assert lg.epochs.entries == [(0, 0), (1, 10)]
    lg.truncate_to(9)  # mid-batch: the straddling batch goes whole
    assert lg.leo == 8 and lg.epochs.entries == [(0, 0)]
    lg.close()
    seg = sorted(tmp_path.glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(batch([b"torn"])[:25])
    again = _log(tmp_path, segment_bytes=200)
    assert again.leo == 8 and _values(again) == [b"%d" % i for i in range(8)]


def test_follower_append_keeps_leader_offsets_and_refuses_gaps(tmp_path: Path) -> None:
    leader, follower = _log(tmp_path / "l"), _log(tmp_path / "f")
    leader.append_as_leader(batch([b"a", b"b"]), 3)
    leader.append_as_leader(batch([b"c"]), 4)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.leo == 3 and follower.epochs.entries == [(3, 0), (4, 2)]
    assert follower.append_as_follower(leader.read(0, 1 << 20)) is None  # a re-fetch is idempotent


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4)), min_size=1, max_size=12))
def test_epoch_cache_answers_end_offsets(entries: list[tuple[int, int]]) -> None:
    """KIP-279: end offset of epoch E = start of the next larger epoch, or LEO for the latest."""
    cache, offset, epoch = LeaderEpochCache(None), 0, 0
    starts: list[tuple[int, int]] = []
    for bump, n in entries:
        epoch += bump
        if not starts or epoch > starts[-1][0]:
            cache.assign(epoch, offset)
            starts.append((epoch, offset))
        offset += n
    for i, (e, _) in enumerate(starts):
        want = starts[i + 1][1] if i + 1 < len(starts) else offset
        assert cache.end_offset_for(e, offset) == (e, want)
    assert cache.end_offset_for(starts[0][0] - 1, offset) == (-1, -1)


def test_recovery_reads_rolled_segments_by_their_index_and_rescans_one_that_does_not_fit(tmp_path: Path) -> None:
    """A rolled segment was fsynced when rolled: recovery takes its index (no scan of its batches);
    an index that does not describe its file sends it through the full scan, with the same result."""
    from logbroker.log.segment import Segment

    lg = _log(tmp_path, segment_bytes=200)
    for i in range(20):
        lg.append_as_leader(batch([b"%d" % i]), leader_epoch=0)
    want = [(s.base_offset, s.bases, s.lasts, s.positions, s.size) for s in lg.segments]
    assert len(want) > 3
    lg.close()
    scanned: list[int] = []
    original = Segment.recover

    def counting(self: Segment) -> int:
        scanned.append(self.base_offset)
        return original(self)

    Segment.recover = counting  # type: ignore[method-assign]
    try:
        again = _log(tmp_path, segment_bytes=200)
        assert [(s.base_offset, s.bases, s.lasts, s.positions, s.size) for s in again.segments] == want
        assert scanned == [want[-1][0]], "only the active segment is scanned"
        again.close()
        index = sorted(tmp_path.glob("*.index"))[1]
        index.write_bytes(index.read_bytes()[:-16])  # one entry short of its file
        scanned.clear()
        third = _log(tmp_path, segment_bytes=200)
        assert [(s.base_offset, s.bases, s.lasts, s.positions, s.size) for s in third.segments] == want
        assert scanned == [want[1][0], want[-1][0]]
        assert _values(third) == [b"%d" % i for i in range(20)]
    finally:
        Segment.recover = original  # type: ignore[method-assign]
