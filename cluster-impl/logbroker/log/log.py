"""`Log`: one partition replica's durable log (segments, recovery, flush policy, checkpoints).

Appends hand in raw v2 batches. As leader, the log assigns offsets and stamps the leader epoch;
as follower, it stores the leader's batches unchanged (offsets included). `truncate_to` drops a
tail (follower truncation, KIP-101/279). Flushing follows `flush.messages` / `flush.ms`; with the
defaults it is left to the OS, which survives a process SIGKILL (page cache) but not power loss.

Beside the segments a log keeps what follows them: the leader-epoch cache, the aborted-transaction
index (`txn_index.py`) and the producer-state snapshots (`snapshots.py`); truncation and recovery cut
all of them back to the log end. The producer state itself lives with the partition
(`core/producer_state.py`), which replays `batches_from` its latest snapshot.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from logbroker.log import snapshots
from logbroker.log.batch import BatchHeader, CorruptBatch, iter_batches, with_offset_and_epoch
from logbroker.log.checkpoint import read_int, write_int
from logbroker.log.epoch_cache import LeaderEpochCache
from logbroker.log.segment import Segment
from logbroker.log.txn_index import AbortedTxnIndex

log = logging.getLogger(__name__)

HW_FILE = "hw-checkpoint"
EPOCH_FILE = "leader-epoch-checkpoint"
START_FILE = "log-start-offset"  # moved by DeleteRecords (the bytes below it stay: no retention here)


@dataclass(frozen=True, slots=True)
class LogConfig:
    flush_messages: int = 2**62  # fsync after this many messages (1 = every append)
    flush_ms: int = 2**62  # ... or when the last fsync is this old
    segment_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    headers: tuple[BatchHeader, ...]
    controls: tuple[bytes, ...] = ()  # the raw control batches among them, in order (markers)


class Log:
    def __init__(self, directory: Path, config: LogConfig, now_ms: Callable[[], int]) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self._now_ms = now_ms
        self.segments: list[Segment] = []
        self.epochs = LeaderEpochCache(self.dir / EPOCH_FILE)
        self._unflushed = 0
        self._last_flush_ms = now_ms()
        self.rolled = False  # a segment was rolled since the owner last looked (it snapshots then)
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        self._recover()

    # --- recovery ------------------------------------------------------------------------------
    def _recover(self) -> None:
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log"))
        for i, base in enumerate(bases):
            seg = Segment.open(self.dir, base)
            rolled = i < len(bases) - 1  # fsynced when rolled: its index is trusted if it fits (segment.py)
            cut = 0 if rolled and seg.load_index() else seg.recover()
            self.segments.append(seg)
            if cut:
                log.warning("%s: truncated %d bytes of torn/corrupt tail in segment %d", self.dir.name, cut, base)
                for later in bases[i + 1 :]:  # anything after a corrupt point is unreachable
                    (self.dir / f"{later:020d}.log").unlink(missing_ok=True)
                    (self.dir / f"{later:020d}.index").unlink(missing_ok=True)
                break
        if not self.segments:
            self.segments.append(Segment.open(self.dir, 0))
        self.epochs.truncate_from_end(self.leo)
        self.aborted = AbortedTxnIndex(self.dir)
        self.aborted.truncate_from(self.leo)
        snapshots.delete_after(self.dir, self.leo)
        self._start = read_int(self.dir / START_FILE, 0)

    # --- offsets -------------------------------------------------------------------------------
    @property
    def leo(self) -> int:
        """Log end offset: the offset the next record will get."""
        for seg in reversed(self.segments):
            if seg.lasts:
                return seg.next_offset
        return self.segments[0].base_offset

    @property
    def first_offset(self) -> int:
        """Where the bytes begin (what a replay reads from, and what followers may still fetch)."""
        return self.segments[0].bases[0] if self.segments[0].bases else self.segments[0].base_offset

    @property
    def log_start_offset(self) -> int:
        """Where the log begins for consumers: the first offset, or where DeleteRecords moved it."""
        return max(self.first_offset, min(self._start, self.leo))

    def advance_start(self, offset: int) -> bool:
        """Move the log start offset up to `offset` (at most the log end), persisted; False if it was
        there already. Records below it are deleted logically: consumers cannot read them, ListOffsets
        earliest is past them; their bytes stay (this broker has no retention to remove segments)."""
        offset = min(offset, self.leo)
        if offset <= self.log_start_offset:
            return False
        self._start = offset
        write_int(self.dir / START_FILE, offset)
        return True

    # --- append --------------------------------------------------------------------------------
    def append_as_leader(self, records: bytes, leader_epoch: int) -> AppendInfo:
        """Assign offsets from LEO and stamp `leader_epoch` on each batch in `records`."""
        out, headers, controls, offset = [], [], [], self.leo
        for pos, h in iter_batches(records):
            stamped = with_offset_and_epoch(bytes(records[pos : pos + h.size]), offset, leader_epoch)
            hs = BatchHeader(offset, h.length, leader_epoch, *_rest(h))
            out.append((hs, stamped))
            headers.append(hs)
            if hs.is_control:
                controls.append(stamped)
            offset = hs.next_offset
        if not out:
            raise CorruptBatch("empty record set")
        if leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(leader_epoch, out[0][0].base_offset)
        self._write(out)
        return AppendInfo(out[0][0].base_offset, out[-1][0].last_offset, tuple(headers), tuple(controls))

    def append_as_follower(self, records: bytes) -> AppendInfo | None:
        """Store the leader's batches as they are; they must continue exactly at our LEO."""
        out = []
        expected = self.leo
        for pos, h in iter_batches(records):
            if h.base_offset < expected:
                continue  # already have it (a re-fetch after a lost response)
            if h.base_offset != expected:
                raise CorruptBatch(f"follower append at {h.base_offset} leaves a gap after LEO {expected}")
            out.append((h, bytes(records[pos : pos + h.size])))
            expected = h.next_offset
            if h.leader_epoch > self.epochs.latest_epoch:
                self.epochs.assign(h.leader_epoch, h.base_offset)
        if not out:
            return None
        self._write(out)
        return AppendInfo(out[0][0].base_offset, out[-1][0].last_offset, tuple(h for h, _ in out),
                          tuple(raw for h, raw in out if h.is_control))

    def _write(self, batches: list[tuple[BatchHeader, bytes]]) -> None:
        for h, data in batches:
            seg = self.segments[-1]
            if seg.size and seg.size + len(data) > self.config.segment_bytes:
                seg.flush()
                seg = Segment.open(self.dir, h.base_offset)
                self.segments.append(seg)
                self.rolled = True
            seg.append(h, data)
            self._unflushed += h.last_offset_delta + 1
        self.maybe_flush()

    def maybe_flush(self) -> None:
        now = self._now_ms()
        if self._unflushed and (
            self._unflushed >= self.config.flush_messages or now - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()

    def flush(self) -> None:
        self.segments[-1].flush()
        self._unflushed = 0
        self._last_flush_ms = self._now_ms()

    # --- read ----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None, *, min_one: bool = True) -> bytes:
        """Whole batches starting with the one holding `offset`, only those ending below `upper_bound`."""
        ub = self.leo if upper_bound is None else upper_bound
        for seg in self.segments:
            if seg.lasts and seg.lasts[-1] >= offset:
                i = seg.find(offset)
                if i is None:
                    continue
                return seg.read_from(i, max_bytes, ub, min_one=min_one)
        return b""

    def batches_from(self, offset: int) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch whose base offset is >= `offset`, in order (header, raw bytes): a replay of
        the log's tail, read a segment at a time."""
        for seg in self.segments:
            if not seg.lasts or seg.lasts[-1] < offset:
                continue
            i = seg.find(offset)
            data = seg.read_all()
            start = seg.positions[i] if i is not None else seg.size
            for p, h in iter_batches(memoryview(data)[start:], verify_crc=False):
                if h.base_offset >= offset:
                    yield h, data[start + p: start + p + h.size]

    def batches(self) -> list[tuple[BatchHeader, bytes]]:
        """Every batch (header, raw bytes); for the dump tool and tests."""
        out: list[tuple[BatchHeader, bytes]] = []
        for seg in self.segments:
            data = seg.read_all()
            out.extend((h, data[p : p + h.size]) for p, h in iter_batches(data, verify_crc=False))
        return out

    # --- truncation ----------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop every batch that holds an offset >= `offset` (a straddling batch goes whole)."""
        if offset >= self.leo:
            return
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
        seg = self.segments[-1]
        i = seg.find(offset)
        if i is not None:
            seg.truncate_before_batch(i)
        seg.flush()
        self.epochs.truncate_from_end(self.leo)
        self.aborted.truncate_from(self.leo)
        snapshots.delete_after(self.dir, self.leo)

    # --- checkpoints ---------------------------------------------------------------------------
    def read_hw_checkpoint(self) -> int:
        return min(read_int(self.dir / HW_FILE, 0), self.leo)

    def write_hw_checkpoint(self, hw: int) -> bool:
        """Safe from a worker thread (the broker writes checkpoints off its event loop, since each is
        two fsyncs): a closed log is never written, so a stale value cannot land in a directory that
        was deleted and created afresh for a new replica meanwhile. False if the log was closed."""
        with self._checkpoint_lock:
            if self._closed:
                return False
            write_int(self.dir / HW_FILE, hw)
            return True

    def close(self) -> None:
        with self._checkpoint_lock:
            self._closed = True
        self.flush()
        for seg in self.segments:
            seg.close()
        self.aborted.close()


def _rest(h: BatchHeader) -> tuple[int, ...]:
    return (h.magic, h.crc, h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
            h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)
