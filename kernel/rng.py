"""Every random choice of a run comes from its seed, by one rule: `rng(seed, *path)`.

A stream is named by a path (`rng(seed, "workload", "worker", 3)`, `rng(seed, "nemesis", "plan")`),
and its state is a hash of the seed and the path, so streams are independent of each other and of
the order in which they are created: adding a worker or a fault family does not shift anyone
else's choices, and a replay draws exactly what the original drew. Nothing else in the project
seeds a `random.Random`.
"""

from __future__ import annotations

import hashlib
import random


def stream_seed(seed: int, *path: object) -> int:
    """The 64-bit state for stream `path` of run `seed` (stable across Python versions and processes)."""
    text = "/".join([str(int(seed)), *(str(p) for p in path)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def rng(seed: int, *path: object) -> random.Random:
    """A fresh, independent random stream named `path` under the run's `seed`."""
    return random.Random(stream_seed(seed, *path))
