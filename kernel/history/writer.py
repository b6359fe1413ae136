"""`HistoryWriter`: appends ops to `history.jsonl` as they happen, flushing each line.

The writer appends and flushes each line as the op happens, so a crash of the harness leaves a
readable history behind (ducktape lost results when its runner died; we do not). It also assigns
`index` (dense, increasing) and `time` (ns since the run started, monotonic), under one lock, so
the file order is the index order.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from kernel.history.op import Op, OpType, Process


class HistoryWriter:
    """Appends ops to `history.jsonl`, flushing each line; thread-safe.

    `clock` returns nanoseconds since the run started; the default is the control host's monotonic
    clock, and the simulation backend injects its own.
    """

    def __init__(self, path: Path, *, clock: Callable[[], int] | None = None, fsync: bool = False) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._f: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._index = 0
        t0 = time.monotonic_ns()
        self._clock = clock or (lambda: time.monotonic_ns() - t0)
        self._default_clock = clock is None
        self._fsync = fsync
        self.counts: dict[str, int] = {t.value: 0 for t in OpType}

    def now(self) -> int:
        return self._clock()

    def start_clock(self) -> None:
        """Make `time` count from now (the workload's start, as Jepsen's relative time does), so
        provisioning and deployment do not shift every op; only before the first op is written."""
        with self._lock:
            if self._index == 0 and self._default_clock:
                t0 = time.monotonic_ns()
                self._clock = lambda: time.monotonic_ns() - t0

    def append(self, process: Process, type: OpType, f: str, value: Any, **extra: Any) -> Op:
        """Record one op now and return it (with its index and time)."""
        with self._lock:
            if self._f is None:
                raise ValueError(f"history {self.path} is closed")
            op = Op(self._index, self._clock(), process, type, f, value, extra)
            self._f.write(json.dumps(op.to_json(), separators=(",", ":"), allow_nan=False) + "\n")
            self._f.flush()
            if self._fsync:
                os.fsync(self._f.fileno())
            self._index += 1
            self.counts[type.value] += 1
            return op

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
                self._f = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
