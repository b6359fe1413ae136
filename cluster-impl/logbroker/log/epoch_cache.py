"""The leader-epoch cache of KIP-101/279: for each leader epoch, the first offset written in it.

It answers OffsetForLeaderEpoch: the end offset of epoch E is the start offset of the next
larger epoch in the cache (or the log end offset if E is the latest). A follower truncates to
what the leader answers instead of to its own high watermark (seed 004). Persisted on every change.
"""

from __future__ import annotations

from pathlib import Path

from logbroker.log.checkpoint import write_atomically

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: list[tuple[int, int]] = []  # (epoch, start_offset), both increasing
        if path is not None and path.exists():
            lines = path.read_text().split("\n")
            count = int(lines[1])
            for line in lines[2 : 2 + count]:
                e, o = line.split()
                self.entries.append((int(e), int(o)))

    def _save(self) -> None:
        if self.path is not None:
            body = "".join(f"{e} {o}\n" for e, o in self.entries)
            write_atomically(self.path, f"0\n{len(self.entries)}\n{body}")

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (idempotent; ignores an older epoch)."""
        if self.entries and epoch <= self.entries[-1][0]:
            return
        # a new epoch cannot start before an existing entry's offset: drop those (a truncated tail)
        self.entries = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries.append((epoch, start_offset))
        self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset), KIP-279's answer; (-1, -1) if none."""
        if not self.entries or epoch < self.entries[0][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch >= self.entries[-1][0]:
            return self.entries[-1][0], log_end_offset
        for i, (e, _) in enumerate(self.entries):
            nxt = self.entries[i + 1]
            if e <= epoch < nxt[0]:
                return e, nxt[1]
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET  # pragma: no cover - loop always returns

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        if self.entries and self.entries[0][1] < start_offset:
            first = [(e, o) for e, o in self.entries if o <= start_offset][-1:]
            rest = [(e, o) for e, o in self.entries if o > start_offset]
            self.entries = [(first[0][0], start_offset)] + rest if first else rest
            self._save()
