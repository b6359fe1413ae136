"""`Disk`: the disk model — what a crash and a power loss leave of a node's logs.

Model: the log's bytes go to real files (a per-node directory, on tmpfs when there is one, so an
fsync costs nothing real). Per log file the model remembers how far fsyncs have made it durable,
across the node's process lives: each process reports what its own fsyncs covered
(`Segment.durable`) and how far it truncated (`Segment.low`; a truncation is taken as durable at
once, as if the file system journaled it — a simplification). A process crash (SIGKILL) keeps
every byte written (the kernel's page cache survives). A power loss keeps each file up to its
durable length and, of the bytes after it, a seeded prefix: none, some (a torn batch, which
recovery's CRC check cuts) or all. Checkpoint files are written with write-fsync-rename-fsync and
survive as written.
"""

from __future__ import annotations

import os
import random
from typing import Any


class Disk:
    def __init__(self) -> None:
        self.durable: dict[str, int] = {}  # log file -> bytes that survive a power loss

    def remember(self, core: Any) -> None:
        """Fold a process's fsyncs and truncations into what the disk holds durably."""
        for p in list(core.partitions.values()):
            for seg in p.log.segments:
                key = str(seg.log_path)
                self.durable[key] = max(min(self.durable.get(key, 0), seg.low), seg.durable)

    def crash(self, core: Any) -> None:
        """A SIGKILL: the process's files close; everything written stays (page cache). The aborted
        transaction index is a file of the log too: left open, every simulated crash and every
        run's end leaked one descriptor per replica (and its deleted file's memory in /dev/shm), and
        a sim-search process died of `Too many open files` after 876 seeds."""
        self.remember(core)
        for p in list(core.partitions.values()):
            for seg in p.log.segments:
                seg.close()
            p.log.aborted.close()

    def power_loss(self, core: Any, rng: random.Random) -> dict[str, int]:
        """The process dies and each log file keeps its durable part plus a seeded part of the rest.
        Returns bytes lost per replica directory."""
        self.crash(core)
        lost: dict[str, int] = {}
        for p in list(core.partitions.values()):
            for seg in p.log.segments:
                key = str(seg.log_path)
                size = os.path.getsize(key) if os.path.exists(key) else 0
                floor = min(self.durable.get(key, 0), size)
                x = rng.random()
                keep = floor if x < 0.5 else (size if x > 0.9 else rng.randint(floor, size))
                if keep < size:
                    os.truncate(key, keep)
                    lost[p.log.dir.name] = lost.get(p.log.dir.name, 0) + size - keep
                self.durable[key] = keep
        return lost
