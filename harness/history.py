"""The history: every operation of a run, one JSON object per line (DESIGN.md, "The history").

The model is Jepsen's (`jepsen.tests.kafka`): a client process *invokes* an op and later completes
it with exactly one of `ok` (it happened), `fail` (it certainly did not happen) or `info` (we do not
know: a timeout, a lost connection). Nemesis ops carry `"process": "nemesis"` and type `info`.

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

NEMESIS = "nemesis"


class OpType(StrEnum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


Process = int | str


@dataclass(frozen=True, slots=True)
class Op:
    """One line of the history. `extra` holds optional keys (`final`, `error`, `node`, ...)."""

    index: int
    time: int
    process: Process
    type: OpType
    f: str
    value: Any
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": str(self.type),
            "f": self.f,
            "value": self.value,
        }
        d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Op:
        core = {"index", "time", "process", "type", "f", "value"}
        return cls(
            index=int(d["index"]),
            time=int(d["time"]),
            process=d["process"],
            type=OpType(d["type"]),
            f=str(d["f"]),
            value=d.get("value"),
            extra={k: v for k, v in d.items() if k not in core},
        )


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
        self._fsync = fsync
        self.counts: dict[str, int] = {t.value: 0 for t in OpType}

    def now(self) -> int:
        return self._clock()

    def append(self, process: Process, type: OpType, f: str, value: Any, **extra: Any) -> Op:
        """Record one op now and return it (with its index and time)."""
        with self._lock:
            if self._f is None:
                raise ValueError(f"history {self.path} is closed")
            op = Op(self._index, self._clock(), process, type, f, value, extra)
            self._f.write(json.dumps(op.to_json(), separators=(",", ":")) + "\n")
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


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) for each non-empty line; the checker's validator builds on this."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                yield n, line


#: Each history key is one topic-partition: key k is partition k of this topic (test.json may name
#: another topic under "topic"). Replica dumps are stored as replicas/<node>/<topic>-<k>.jsonl.
DEFAULT_TOPIC = "chaos"


def key_to_topic_partition(key: int, topic: str = DEFAULT_TOPIC) -> tuple[str, int]:
    return topic, key
