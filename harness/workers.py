"""Client workers: each a thread that plays its seeded op stream through a `QueueClient`, recording
every op (invoke, then exactly one completion) in the history. A process that gets `info` is
retired: its client is closed and the worker continues as a fresh process number (Jepsen's rule).
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from harness.history import HistoryWriter, OpType
from workloads.queue import QueueClient, generate

log = logging.getLogger(__name__)


@dataclass
class WorkerPool:
    history: HistoryWriter
    bootstraps: list[str]
    spec: Any  # RunSpec
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._next_process = itertools.count(self.spec.concurrency)
        self._lock = threading.Lock()

    def new_process(self) -> int:
        with self._lock:
            return next(self._next_process)

    def client(self, worker: int, process: int, rng: random.Random) -> QueueClient:
        return QueueClient(rng.choice(self.bootstraps), self.spec.topic, acks=self.spec.acks,
                           idempotence=self.spec.idempotence, process=process)

    def start(self) -> None:
        for w in range(self.spec.concurrency):
            t = threading.Thread(target=self._loop, args=(w,), name=f"worker-{w}", daemon=True)
            self.threads.append(t)
            t.start()

    def join(self, timeout: float = 30.0) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))

    def _loop(self, w: int) -> None:
        period = self.spec.concurrency / self.spec.rate
        rng = random.Random(f"{self.spec.seed}/bootstrap/worker-{w}")
        process = w
        client: QueueClient | None = None
        nxt = time.monotonic()
        try:
            for inv in generate(self.spec.seed, w, self.spec.partitions):
                if self.stop.is_set():
                    break
                if client is None:
                    client = self.client(w, process, rng)
                self.history.append(process, OpType.INVOKE, inv.f, inv.value, worker=w)
                typ, value, extra = self._invoke(client, inv)
                self.history.append(process, typ, inv.f, value, **extra)
                if typ is OpType.INFO:
                    client.close()
                    client = None
                    process = self.new_process()
                nxt += period
                self.stop.wait(max(0.0, nxt - time.monotonic()))
        except Exception as e:  # a harness bug; the run reports it instead of hanging
            log.exception("worker %d crashed", w)
            self.errors.append(f"worker {w}: {e!r}")
        finally:
            if client is not None:
                client.close()

    @staticmethod
    def _invoke(client: QueueClient, inv: Any) -> tuple[OpType, Any, dict[str, Any]]:
        try:
            if inv.f == "send":
                _, k, v = inv.value[0]
                typ, offset, err = client.send(k, v)
                if typ == "ok":
                    return OpType.OK, [["send", k, [offset, v]]], {}
                return OpType(typ), inv.value, {"error": err}
            if inv.f == "assign":
                client.assign(inv.value)
                return OpType.OK, inv.value, {}
            reads = client.poll()
            return OpType.OK, [["poll", reads]], {}
        except Exception as e:  # we do not know what happened: info, never fail
            return OpType.INFO, inv.value, {"error": f"{type(e).__name__}: {e}"}


def _high_watermarks(client: QueueClient, keys: list[int], deadline: float) -> dict[int, int] | None:
    """Each key's high watermark, asking again while leadership settles: a leader can still move
    after the recovery wait (a reassignment finishing, a preferred election), and the client's
    metadata catches up only after a NOT_LEADER answer."""
    while True:
        try:
            return client.high_watermarks(keys)
        except Exception as e:
            if time.monotonic() > deadline:
                log.warning("final drain: no high watermarks before the deadline: %s", e)
                return None
            time.sleep(0.5)


def final_drain(history: HistoryWriter, bootstraps: list[str], spec: Any, process: int,
                timeout_s: float = 60.0) -> bool:
    """A fresh process reads every key from offset 0 to its end; its ops carry `"final": true`.

    Returns True if every key was read up to its high watermark."""
    keys = list(range(spec.partitions))
    client = QueueClient(",".join(bootstraps), spec.topic, acks=spec.acks, idempotence=False, process=process)
    try:
        history.append(process, OpType.INVOKE, "assign", keys, final=True)
        client.assign(keys)
        history.append(process, OpType.OK, "assign", keys, final=True)
        deadline = time.monotonic() + timeout_s
        ends = _high_watermarks(client, keys, deadline)
        if ends is None:  # no leader answered in time: the drain is incomplete, the check says so
            return False
        done: set[int] = {k for k, e in ends.items() if e <= 0}
        while len(done) < len(keys) and time.monotonic() < deadline:
            history.append(process, OpType.INVOKE, "poll", [["poll"]], final=True)
            try:
                reads = client.poll(1.0)
            except Exception as e:
                history.append(process, OpType.INFO, "poll", [["poll"]], final=True, error=str(e))
                return False
            history.append(process, OpType.OK, "poll", [["poll", reads]], final=True)
            for k, pairs in reads.items():
                if pairs and pairs[-1][0] + 1 >= ends[int(k)]:
                    done.add(int(k))
        return len(done) == len(keys)
    finally:
        client.close()
