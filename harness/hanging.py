"""Hanging transactions: a partition whose last stable offset stays below its high watermark.

A transaction that is never completed holds the LSO where it began, and read_committed consumers
stall there for good (KIP-664, "Provide tooling to detect and abort hanging transactions"; KAFKA-16352
is one way to get there). The history cannot show it: a read_committed drain simply stops at the
LSO, and whether what lies beyond was committed is exactly what nobody can read. So before the drain
(whose read_committed end is the LSO of its moment) the harness asks every partition's leader for its
LSO and HW, gives any open transaction the time the coordinator needs to abort it (the transaction
timeout and the coordinator's abort scan), and writes what is still open into test.json
(`hanging_transactions`); the check names it `hanging-transaction`.
It also asks every broker which transactions it still coordinates unfinished (ListTransactions): one
left in PrepareCommit after its coordinator moved has its markers written, so no LSO shows it, but
its end is never written and its producer is refused for good (KAFKA-16352).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kernel.db import HasStableEnds, StableEnd
from kernel.nemesis import PlannedFault
from kernel.runtime import Runtime

#: the workloads' transaction timeout (10 s), the coordinator's scan for timed-out transactions
#: (10 s), and the abort's markers, with room to spare
PATIENCE_S = 40.0
POLL_S = 1.0


def patience_for(faults: Iterable[PlannedFault]) -> float:
    """`PATIENCE_S`, plus the largest step forward of any node's wall clock the run's faults make.

    Why: a coordinator stamps a transaction's start with its wall clock and aborts it once that clock
    passes start + timeout (Kafka's `txnStartTimestamp`, as ours). A transaction begun while its
    coordinator's clock ran X s ahead is aborted only X s after that clock is set back: late, not
    never. Simulated seed 200251 of a clean transactional cluster (a forward clock bump while a leader
    was a zombie) left one Ongoing past the fixed patience, which called that hanging
    (docs/measurements/transactions.md, "The clean transactional cluster on the simulator, first
    try")."""
    ahead = [float(f.params.get("seconds", 0.0)) for f in faults if f.family == "clock"]
    return PATIENCE_S + max([0.0, *ahead])


@dataclass(frozen=True)
class Hanging:
    """What is still open once the patience has run out: partitions whose LSO is below their HW, and
    transactional ids still Ongoing or in a Prepare state."""

    partitions: dict[int, StableEnd]
    transactions: dict[str, str]

    def __bool__(self) -> bool:
        return bool(self.partitions or self.transactions)

    def to_json(self) -> dict[str, Any]:
        return {"partitions": {str(p): {"lso": e.lso, "hw": e.hw} for p, e in sorted(self.partitions.items())},
                "transactions": dict(sorted(self.transactions.items()))}


def hanging_transactions(db: HasStableEnds, topic: str, partitions: int, runtime: Runtime,
                         patience_s: float = PATIENCE_S) -> Hanging:
    """What is still open once `patience_s` has passed (at once, nothing, when nothing is open: the
    common case costs one ListOffsets and one ListTransactions round)."""
    deadline = runtime.now() + patience_s
    while True:
        stuck = Hanging({p: e for p, e in db.stable_ends(topic, partitions).items() if e.lso < e.hw},
                        db.open_transactions())
        if not stuck or runtime.now() >= deadline:
            return stuck
        runtime.pass_time(POLL_S)
