"""The disk model: what a power loss leaves of a node's logs.

Model: the log's bytes go to real files (a per-node directory, on tmpfs when there is one, so an
fsync costs nothing real). The log records how far its last fsync reached in each segment
(`Segment.durable`). A process crash (SIGKILL) keeps everything written (the kernel's page cache
survives); a power loss keeps each segment file only up to its last fsync, and of the bytes after
it a seeded prefix — none, some (a torn batch, which recovery's CRC check cuts), or all of them.
Checkpoint files are written with write-fsync-rename-fsync and survive as written. A truncation is
taken as durable at once (as if the file system journaled it): a model simplification.
"""

from __future__ import annotations

import os
import random
from typing import Any


def lose_unflushed(core: Any, rng: random.Random) -> dict[str, int]:
    """Cut every segment of `core`'s logs back to its last fsync plus a seeded part of the rest;
    close the files. Returns bytes lost per replica directory (for the node's log)."""
    lost: dict[str, int] = {}
    for p in list(core.partitions.values()):
        for seg in p.log.segments:
            size = os.path.getsize(seg.log_path) if seg.log_path.exists() else 0
            seg.close()
            if size <= seg.durable:
                continue
            x = rng.random()
            keep = seg.durable if x < 0.5 else (size if x > 0.9 else rng.randint(seg.durable, size))
            if keep < size:
                os.truncate(seg.log_path, keep)
                lost[p.log.dir.name] = lost.get(p.log.dir.name, 0) + size - keep
    return lost


def close_files(core: Any) -> None:
    """A crash closes the process's files (the page cache keeps what was written)."""
    for p in list(core.partitions.values()):
        for seg in p.log.segments:
            seg.close()
