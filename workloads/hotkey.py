"""The hot-key workload: the queue workload's client, with every worker on key 0.

One partition under all the load is where a leader's acknowledged-but-unreplicated tail is largest
when it dies, so lost writes and divergent logs show up with fewer faults. It is also the proof that
a workload is a value: one file (a generator over the queue client) plus one registry line.
"""

from __future__ import annotations

from kernel.rng import rng as seeded
from kernel.spec import RunSpec
from kernel.workload import Completion, Invocation, Workload
from workloads.queue import FinalDrain, QueueClient


class HotKeyGenerator:
    """Assign key 0, then sends to key 0 (60 %) and polls (40 %)."""

    def __init__(self, spec: RunSpec, worker: int) -> None:
        self.rng = seeded(spec.seed, "workload", "hotkey", "worker", worker)
        self.worker = worker
        self.seq = 0
        self.started = False

    def next(self) -> Invocation:
        if not self.started:
            self.started = True
            return Invocation("assign", [0])
        if self.rng.random() < 0.6:
            self.seq += 1
            return Invocation("send", [["send", 0, (self.worker + 1) * 1_000_000_000 + self.seq]])
        return Invocation("poll", [["poll"]])

    def update(self, op: Invocation, done: Completion) -> None:
        return None


WORKLOAD = Workload("hotkey", QueueClient, HotKeyGenerator, FinalDrain,
                    "every worker sends to and polls key 0 (one partition under all the load)")
