"""The history (docs/design.md, "The history format"): its model, its one writer and its one reader.

Nothing else in the project knows how an op or a micro-op is laid out. Writers append through
`HistoryWriter`; every reader — the checks' validation and the typed columns their Spark job reads
(`kernel.history.columns`, written in the same pass), the elle-cli export, the perf facts, the
workers' final drain — goes through `read_ops`/`scan`, `pairs`, `writes`, `reads`. A line that
does not match the schema is never dropped or guessed at: it is a `HistoryError` naming the file,
the line and the reason.
"""

from kernel.history.op import (
    CLIENT_FS,
    NEMESIS,
    Op,
    OpType,
    Read,
    Write,
    assigned_keys,
    commits,
    ctp_sources,
    fenced,
    fetched_commits,
    group_offsets,
    is_ctp,
    micro_ops,
    reads,
    rebalanced_keys,
    txn_offsets,
    writes,
)
from kernel.history.reader import HistoryScan, pairs, read_ops, scan
from kernel.history.writer import HistoryWriter

__all__ = [
    "CLIENT_FS",
    "NEMESIS",
    "HistoryScan",
    "HistoryWriter",
    "Op",
    "OpType",
    "Read",
    "Write",
    "assigned_keys",
    "commits",
    "ctp_sources",
    "fenced",
    "fetched_commits",
    "group_offsets",
    "is_ctp",
    "micro_ops",
    "pairs",
    "read_ops",
    "reads",
    "rebalanced_keys",
    "scan",
    "txn_offsets",
    "writes",
]
