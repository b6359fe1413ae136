"""Every random choice of a simulation comes from its seed by one rule: `stream(seed, *path)` — the
harness's rule (`kernel/rng.py` there), restated here because cluster-impl is its own package and
imports nothing of the harness. A stream's state is a hash of the seed and its path, so streams are
independent of each other and of the order they are made in. The harness's adapter hands its own
`kernel.rng.rng` in (`SimCluster(streams=...)`); a test in tests/foundation checks the two agree.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

#: path -> a fresh stream of one simulation
Streams = Callable[..., random.Random]


def stream(seed: int, *path: object) -> random.Random:
    """The stream named `path` under `seed` (sha256 of "seed/path...", its first 8 bytes)."""
    text = "/".join([str(int(seed)), *(str(p) for p in path)])
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


def streams(seed: int) -> Streams:
    """The streams of simulation `seed`, under the path prefix "sim"."""
    return lambda *path: stream(seed, "sim", *path)
