"""The worker pool: plays ops from a workload's generators through its clients, and records them.

It knows nothing of what an op means, nor which backend it runs on. Each worker is an activity
(`kernel/runtime.py`: a thread in containers, a task in the simulator) with one op in flight
(Jepsen's rule): it asks its generator for the next invocation, writes the invoke, awaits the
client, writes the completion, and tells the generator how it ended. A process that gets `info` is
retired: its client is closed and the worker continues as a fresh process number. Which node a new
process bootstraps from is drawn from `rng(seed, "pool", "bootstrap", worker)`. The final drain is
the same loop over the workload's `final_generator`, by one fresh process, with `"final": true` ops.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from kernel.db import Cluster
from kernel.history import HistoryWriter, OpType
from kernel.rng import rng as seeded
from kernel.runtime import Activity, Runtime
from kernel.spec import RunSpec
from kernel.workload import Client, ClientContext, Completion, Connect, Generator, Invocation, Workload

log = logging.getLogger(__name__)
DRAIN_TIMEOUT_S = 90.0
NAP_S = 0.25  # the longest a pacing wait sleeps before it looks whether the workers must stop


@dataclass
class DrainOutcome:
    """Whether the final generator finished (True) or ran out of time / met a failed op (False)."""

    complete: bool
    ops: int


@dataclass
class WorkerPool:
    workload: Workload
    spec: RunSpec
    history: HistoryWriter
    cluster: Cluster
    address_of: Any  # Callable[[Node], str]: where a client of a node connects
    connect: Connect
    runtime: Runtime
    stop: bool = False
    activities: list[Activity] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._next_process = itertools.count(self.spec.concurrency)
        self._lock = threading.Lock()

    def new_process(self) -> int:
        with self._lock:
            return next(self._next_process)

    def _client(self, process: int, chooser: object) -> Client:
        ctx = ClientContext(self.spec, process, self.address_of, [self.address_of(n) for n in self.cluster.nodes],
                            self.connect)
        client = self.workload.client_factory(ctx)
        client.open(chooser.choice(self.cluster.nodes))  # type: ignore[attr-defined]
        return client

    def start(self) -> None:
        for w in range(self.spec.concurrency):
            self.activities.append(self.runtime.spawn(f"worker-{w}", self._loop(w)))

    def join(self, timeout: float = 30.0) -> None:
        """Tell the workers to stop after their op in flight and wait for them (bounded); a worker
        still in its op then is cancelled at its next await."""
        self.stop = True
        self.runtime.join(self.activities, timeout)
        for a in self.activities:
            a.cancel()

    async def _play(self, process: int, client: Client, inv: Invocation, gen: Generator, worker: int | None = None
                    ) -> Completion:
        who = {"worker": worker} if worker is not None else {}
        self.history.append(process, OpType.INVOKE, inv.f, inv.value, **inv.extra, **who)
        done = await client.invoke(inv)
        self.history.append(process, done.type, inv.f, done.value, **{**inv.extra, **done.extra})
        gen.update(inv, done)
        return done

    async def _nap(self, seconds: float) -> None:
        """Wait `seconds` for the op rate, looking now and then whether the workers must stop."""
        while seconds > 0 and not self.stop:
            await asyncio.sleep(min(seconds, NAP_S))
            seconds -= NAP_S

    async def _loop(self, w: int) -> None:
        loop = asyncio.get_running_loop()
        period = self.spec.concurrency / self.spec.rate
        chooser = seeded(self.spec.seed, "pool", "bootstrap", w)
        gen = self.workload.generator(self.spec, w)
        process = w
        client: Client | None = None
        nxt = loop.time()
        try:
            while not self.stop:
                inv = gen.next()
                if inv is None:
                    break
                if client is None:
                    client = self._client(process, chooser)
                done = await self._play(process, client, inv, gen, w)
                if done.type is OpType.INFO:
                    client.close()
                    client = None
                    process = self.new_process()
                nxt += period
                await self._nap(nxt - loop.time())
        except Exception as e:  # a harness bug; the run reports it (verdict unknown) instead of hanging
            log.exception("worker %d crashed", w)
            self.errors.append(f"worker {w}: {type(e).__name__}: {e}")
        finally:
            if client is not None:
                client.close()

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> DrainOutcome:
        """Play the final generator with one fresh process until it is done or `timeout_s` passes."""
        return self.runtime.run(self._drain(timeout_s))

    async def _drain(self, timeout_s: float) -> DrainOutcome:
        if self.workload.final_generator is None:
            return DrainOutcome(True, 0)
        loop = asyncio.get_running_loop()
        gen = self.workload.final_generator(self.spec)
        process = self.new_process()
        client = self._client(process, seeded(self.spec.seed, "pool", "drain"))
        deadline = loop.time() + timeout_s
        n = 0
        try:
            while loop.time() < deadline:
                inv = gen.next()
                if inv is None:
                    return DrainOutcome(True, n)
                done = await self._play(process, client, inv, gen)
                n += 1
                if done.type is not OpType.OK:
                    return DrainOutcome(False, n)
            return DrainOutcome(False, n)
        finally:
            client.close()
