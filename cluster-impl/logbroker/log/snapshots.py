"""Producer-state snapshots of one partition replica: `<offset>.snapshot`, the state after every batch
below `offset`, as JSON (an operator can read it; the producer state module owns its content).

Why: the producer state (idempotence, open transactions) is a fold over the whole log. A snapshot
lets a restart or a truncation replay only the batches after the latest snapshot at or below the new
log end, instead of the whole log, as Kafka's `.snapshot` files do. Written atomically (temporary
file, fsync, rename) when a segment is rolled and when the replica is closed; a snapshot past the log
end (the log was truncated or lost a torn tail) is deleted; the newest `KEEP` are kept. One that does
not parse is skipped and removed (the replay then starts from an older one, or from the start).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from logbroker.log.checkpoint import write_atomically

log = logging.getLogger(__name__)
SUFFIX = ".snapshot"
KEEP = 3


def _offsets(directory: Path) -> list[int]:
    out = []
    for p in directory.glob(f"*{SUFFIX}"):
        try:
            out.append(int(p.name[: -len(SUFFIX)]))
        except ValueError:
            continue
    return sorted(out)


def path_of(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SUFFIX}"


def write(directory: Path, offset: int, doc: dict[str, Any]) -> None:
    write_atomically(path_of(directory, offset), json.dumps(doc, separators=(",", ":")))
    for old in _offsets(directory)[:-KEEP]:
        path_of(directory, old).unlink(missing_ok=True)


def delete_after(directory: Path, offset: int) -> None:
    """Remove the snapshots of states past `offset`."""
    for o in _offsets(directory):
        if o > offset:
            path_of(directory, o).unlink(missing_ok=True)


def latest(directory: Path, at_most: int) -> tuple[int, dict[str, Any]] | None:
    """The newest readable snapshot at or below `at_most`: (its offset, its document)."""
    for o in reversed(_offsets(directory)):
        if o > at_most:
            continue
        p = path_of(directory, o)
        try:
            return o, json.loads(p.read_text())
        except (OSError, ValueError) as e:
            log.warning("%s: unreadable producer snapshot (%s); removing it", p, e)
            p.unlink(missing_ok=True)
    return None
