"""Small checkpoint files written atomically (write to a temp file, fsync, rename, fsync the dir).

Formats are plain text so an operator can read them: `hw-checkpoint` holds one integer; the
`leader-epoch-checkpoint` holds `version`, a count, then `epoch start_offset` per line, as Kafka's.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip() or default)
    except (FileNotFoundError, ValueError):
        return default


def write_int(path: Path, value: int) -> None:
    write_atomically(path, f"{value}\n")
