"""Hanging transactions: a partition whose last stable offset stays below its high watermark.

A transaction that is never completed holds the LSO where it began, and read_committed consumers
stall there for good (KIP-664, "Provide tooling to detect and abort hanging transactions"; KAFKA-16352
is one way to get there). The history cannot show it: a read_committed drain simply stops at the
LSO, and whether what lies beyond was committed is exactly what nobody can read. So after the drain
the harness asks every partition's leader for its LSO and HW, gives any open transaction the time the
coordinator needs to abort it (the transaction timeout and the coordinator's abort scan), and writes
what is still open into test.json (`hanging_transactions`); the check names it `hanging-transaction`.
"""

from __future__ import annotations

from kernel.db import HasStableEnds, StableEnd
from kernel.runtime import Runtime

#: the workloads' transaction timeout (10 s), the coordinator's scan for timed-out transactions
#: (10 s), and the abort's markers, with room to spare
PATIENCE_S = 40.0
POLL_S = 1.0


def hanging_transactions(db: HasStableEnds, topic: str, partitions: int, runtime: Runtime,
                         patience_s: float = PATIENCE_S) -> dict[int, StableEnd]:
    """Partitions whose LSO is still below their HW once `patience_s` has passed (at once, {}, when
    none is open: the common case costs one ListOffsets round)."""
    deadline = runtime.now() + patience_s
    while True:
        stuck = {p: e for p, e in db.stable_ends(topic, partitions).items() if e.lso < e.hw}
        if not stuck or runtime.now() >= deadline:
            return stuck
        runtime.pass_time(POLL_S)
