"""The `sim` provisioner: a whole run inside one process on `logsim`, the deterministic simulator.

The production broker code runs on simulated nodes (`logsim.cluster.SimCluster`); the same phases
happen as for containers — nodes up, brokers and ZooKeeper, the topic, workers and the nemesis for
the time limit, heal, wait for recovery, the final drain, replica dumps and node logs — but on
simulated time, driven by one seeded loop. The workload's own generators and final drain choose
the ops, `sim_client.py` plays them with a Kafka client's semantics, `sim_nemesis.py` acts out the
planned schedule, and `HistoryWriter` writes the same `history.jsonl`, stamped with simulated time.
Nothing in a simulated run reads a wall clock or waits for a thread, so a seed gives one history,
byte for byte: `simulate` twice is the determinism check, and `chaos replay` reproduces it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logsim.client import SimKafkaClient
from logsim.cluster import SimCluster

from harness.provision.sim_client import SimQueueClient
from harness.provision.sim_nemesis import SimNemesis
from kernel.db import Cluster
from kernel.history import HistoryWriter, OpType
from kernel.nemesis import PlannedFault
from kernel.node import Node, node_names
from kernel.rng import rng as seeded
from kernel.spec import RunSpec
from kernel.workload import Completion, Generator, Invocation, Workload

log = logging.getLogger(__name__)
DRAIN_TIMEOUT_S = 90.0
SETTLE_S = 5.0  # brokers register and elect a controller before the topic is made


class SimProvisioner:
    """Nodes that exist only inside the simulator: nothing to bring up or tear down."""

    kind = "sim"

    def __init__(self, cluster: str = "chaos") -> None:
        self.cluster = cluster

    def up(self, n: int) -> list[Node]:
        return [Node(name, name, name) for name in node_names(n)]

    def down(self) -> None:
        return None

    def leftovers(self) -> int:
        return 0

    def connect(self, nodes: list[Node]) -> Cluster:
        return Cluster(nodes, {})

    def facts(self) -> dict[str, object]:
        return {"provisioner": "sim"}


@dataclass
class SimOutcome:
    recovered: bool
    drained: bool
    ops: dict[str, int]
    sim_seconds: float
    worker_errors: list[str] = field(default_factory=list)
    loop_errors: list[str] = field(default_factory=list)


def broker_settings(spec: RunSpec) -> dict[str, str]:
    """What `harness.db.logbroker.broker_properties` gives a container broker, plus `flush.messages=1`:
    a simulated power loss drops what was not fsynced, and acks=all promises durability only if
    every acknowledged record is on disk (override it with `extra` to see Kafka's default)."""
    return {"min.insync.replicas": str(spec.min_insync), "num.partitions": str(spec.partitions),
            "default.replication.factor": str(min(spec.replication_factor, spec.nodes)),
            "offsets.topic.replication.factor": str(min(3, spec.nodes)), "flush.messages": "1",
            **dict(spec.extra)}


class _Run:
    def __init__(self, spec: RunSpec, workload: Workload, faults: list[PlannedFault], history: HistoryWriter,
                 cluster: SimCluster) -> None:
        self.spec, self.workload, self.faults, self.history, self.c = spec, workload, faults, history, cluster
        self.processes = itertools.count(spec.concurrency)
        self.stop = False
        self.errors: list[str] = []
        self.t0 = 0.0

    def client(self, process: int, chooser: Any) -> SimQueueClient:
        spec = self.spec
        k = SimKafkaClient(self.c.net, self.c.names, chooser.choice(self.c.names), spec.topic,
                           seeded(spec.seed, "sim", "client", process),
                           acks=-1 if spec.acks == "all" else int(spec.acks), idempotent=spec.idempotence)
        return SimQueueClient(k)

    async def play(self, process: int, client: SimQueueClient, inv: Invocation, gen: Generator,
                   worker: int | None = None) -> Completion:
        who = {"worker": worker} if worker is not None else {}
        self.history.append(process, OpType.INVOKE, inv.f, inv.value, **inv.extra, **who)
        done = await client.invoke(inv)
        self.history.append(process, done.type, inv.f, done.value, **{**inv.extra, **done.extra})
        gen.update(inv, done)
        return done

    async def worker(self, w: int) -> None:
        spec = self.spec
        period = spec.concurrency / spec.rate
        chooser = seeded(spec.seed, "pool", "bootstrap", w)
        gen = self.workload.generator(spec, w)
        process = w
        client: SimQueueClient | None = None
        loop = self.c.loop
        nxt = loop.time()
        try:
            while not self.stop:
                inv = gen.next()
                if inv is None:
                    break
                if client is None:
                    client = self.client(process, chooser)
                done = await self.play(process, client, inv, gen, w)
                if done.type is OpType.INFO:
                    client = None
                    process = next(self.processes)
                nxt += period
                await asyncio.sleep(max(0.0, nxt - loop.time()))
        except Exception as e:  # a harness bug: the run says unknown instead of hanging
            log.exception("sim worker %d crashed", w)
            self.errors.append(f"worker {w}: {type(e).__name__}: {e}")

    async def drain(self) -> bool:
        if self.workload.final_generator is None:
            return True
        gen = self.workload.final_generator(self.spec)
        process = next(self.processes)
        client = self.client(process, seeded(self.spec.seed, "pool", "drain"))
        deadline = self.c.loop.time() + DRAIN_TIMEOUT_S
        while self.c.loop.time() < deadline:
            inv = gen.next()
            if inv is None:
                return True
            done = await self.play(process, client, inv, gen)
            if done.type is not OpType.OK:
                return False
        return False

    async def main(self, say: Callable[[str], None]) -> tuple[bool, bool]:
        spec, c, loop = self.spec, self.c, self.c.loop
        c.start()
        await asyncio.sleep(SETTLE_S)
        c.create_topic(spec.topic, spec.partitions, spec.replication_factor)
        for _ in range(120):
            if c.recovered(spec.topic, spec.partitions, spec.replication_factor):
                break
            await asyncio.sleep(0.5)
        self.t0 = loop.time()  # the history's time counts from here (`simulate`)
        nemesis = SimNemesis(c, self.faults, self.history, spec.topic, spec.partitions)
        nemesis.start()
        workers = [loop.spawn(None, self.worker(w), name=f"worker {w}") for w in range(spec.concurrency)]
        await asyncio.sleep(spec.time_limit)
        self.stop = True
        await asyncio.wait(workers, timeout=30)
        await nemesis.heal()
        recovered = False
        deadline = loop.time() + spec.recovery_timeout
        while loop.time() < deadline:
            if c.recovered(spec.topic, spec.partitions, spec.replication_factor):
                recovered = True
                break
            await asyncio.sleep(0.5)
        drained = await self.drain()
        return recovered, drained


def simulate(spec: RunSpec, workload: Workload, faults: list[PlannedFault], run_dir: Path,
             say: Callable[[str], None] = print) -> SimOutcome:
    """One simulated run into `run_dir`: history.jsonl, replicas/, nodes/. Deterministic in the seed."""
    with SimCluster(spec.seed, spec.nodes, settings=broker_settings(spec), bugs=tuple(spec.bugs)) as c:
        r: _Run | None = None

        def now_ns() -> int:
            """Simulated nanoseconds since the workload began."""
            return int(round((c.loop.time() - (r.t0 if r else 0.0)) * 1e9))

        history = HistoryWriter(run_dir / "history.jsonl", clock=now_ns)
        r = _Run(spec, workload, faults, history, c)
        try:
            recovered, drained = c.loop.run_until_complete(r.main(say))
        finally:
            history.close()
        for name in c.names:
            rep = run_dir / "replicas" / name
            rep.mkdir(parents=True, exist_ok=True)
            for fname, data in c.dump_replicas(name).items():
                (rep / fname).write_bytes(data)
            logs = run_dir / "nodes" / name
            logs.mkdir(parents=True, exist_ok=True)
            (logs / "broker.log").write_text("\n".join(c.nodes[name].log_lines) + "\n")
        return SimOutcome(recovered, drained, dict(history.counts), c.loop.time(), r.errors, list(c.loop.errors))


class Nondeterminism(RuntimeError):
    """Two simulations of one seed wrote different histories: a bug in the simulator or in code that
    reads something outside it (a wall clock, a thread, an unordered set of strings)."""


def check_determinism(spec: RunSpec, workload: Workload, faults: list[PlannedFault], history: Path) -> None:
    """Simulate the seed again and compare the history with `history`, line by line."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="chaos-sim-") as d:
        simulate(spec, workload, faults, Path(d), lambda _: None)
        diff = first_difference(history, Path(d) / "history.jsonl")
    if diff is not None:
        line, a, b = diff
        raise Nondeterminism(f"seed {spec.seed} is not deterministic: history.jsonl line {line} differs\n"
                             f"  first:  {a}\n  second: {b}")


def first_difference(a: Path, b: Path) -> tuple[int, str, str] | None:
    """The first line (1-based) where two histories differ, with both lines; None when identical."""
    with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
        for i, (x, y) in enumerate(itertools.zip_longest(fa, fb, fillvalue=""), 1):
            if x != y:
                return i, x.rstrip("\n"), y.rstrip("\n")
    return None
