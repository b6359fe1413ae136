"""The phases of a run, each a context manager that undoes itself whatever stops the run.

provisioned → (warming: the checker, in the background) → deployed → armed (the nemesis, healed on
the way out) → recorded (workers for the time limit) → healed (and recovered?) → drained → collected →
checked. The same phases run on every backend: what waits in them goes through the test's runtime
(`kernel/runtime.py`: threads and the wall clock in containers, the simulator's loop on virtual time).
`RunRecord` is the run's store directory and history; every phase marks itself in `test.json`
(`phase`, `phases` timings, in wall seconds), so an interrupted run says where it stopped.
Cleanup runs `shielded()`: a second Ctrl-C or a SIGTERM during teardown is remembered,
not obeyed, until the containers and rules are gone.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.hanging import hanging_transactions, patience_for
from harness.pool import WorkerPool
from harness.progress import live_progress
from harness.provision.state import ClusterState
from harness.runtime import ThreadRuntime
from harness.signals import shielded
from kernel.db import DB, Cluster, HasApiVersions, HasLeaderViews, HasLogFiles, HasReplicaDumps, HasStableEnds
from kernel.errors import ChaosError, ProvisionError
from kernel.history import HistoryWriter
from kernel.nemesis import NemesisContext, PlannedFault
from kernel.node import Node
from kernel.runtime import Runtime
from kernel.store import RunDir
from kernel.system import check_features
from kernel.test import Test
from nemesis.runner import NemesisRunner

log = logging.getLogger(__name__)


@dataclass
class RunRecord:
    """The run directory, its history and where the run is: what survives any way the run ends.
    The history's `time` counts from `start_clock()` (the workload's start) on the runtime's clock."""

    rd: RunDir
    runtime: Runtime
    say: Callable[[str], None] = print
    phase: str = "start"
    seconds: dict[str, float] = field(default_factory=dict)
    _t: float = field(default_factory=time.monotonic)
    _t0: float = 0.0
    history: HistoryWriter = field(init=False)
    #: told each phase as it is entered (`chaos run` prints a line per phase)
    on_phase: Callable[[str], Any] = lambda phase: None

    def __post_init__(self) -> None:
        self.history = HistoryWriter(self.rd.history, clock=self._now_ns)

    def _now_ns(self) -> int:
        return int(round((self.runtime.now() - self._t0) * 1e9))

    def start_clock(self) -> None:
        self._t0 = self.runtime.now()

    @property
    def path(self) -> Path:
        return self.rd.path

    def enter(self, phase: str) -> None:
        now = time.monotonic()
        self.seconds[self.phase] = round(now - self._t, 3)
        self._t = now
        self.phase = phase
        self.rd.write_meta(phase=phase, phases=dict(self.seconds))
        self.on_phase(phase)


@contextlib.contextmanager
def recording(test: Test, say: Callable[[str], None]) -> Iterator[RunRecord]:
    rd = RunDir.create(test.spec)
    rd.write_meta(**(test.info or {}))
    rec = RunRecord(rd, test.runtime, say)
    try:
        yield rec
    finally:
        with shielded():
            rec.history.close()


def _quietly(what: str, fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception as e:  # teardown keeps going; the real error (if any) is already on its way up
        log.warning("%s failed: %s", what, e)


@contextlib.contextmanager
def provisioned(test: Test, rec: RunRecord) -> Iterator[Cluster]:
    """Nodes up (after removing what a crashed earlier run left under this name); down at the end."""
    rec.enter("provision")
    prov, spec = test.provisioner, test.spec
    with shielded():
        stale = prov.leftovers()
        if stale:
            rec.say(f"removing {stale} container(s)/network(s) an earlier run left under cluster name {spec.cluster!r}")
            prov.down()
    try:
        with shielded():
            nodes = prov.up(spec.nodes)
        cluster = prov.connect(nodes)
    except BaseException:
        if not spec.leave_running:
            with shielded():
                _quietly("removing the half-made cluster", prov.down)
        raise
    rec.rd.write_meta(nodes=[n.to_json() for n in nodes], **prov.facts())
    try:
        yield cluster
    finally:
        with shielded():
            for r in cluster.remotes.values():
                _quietly("closing a connection", r.close)
            if not spec.leave_running:
                _quietly("tearing down the nodes", prov.down)


@contextlib.contextmanager
def warming(test: Test, rec: RunRecord, check: bool) -> Iterator[None]:
    """Start the checker's warm-up (`warm_up(run_dir)`: its Spark session and compiled checks, in the
    background) once the nodes exist, so it overlaps the deployment's waits and the workload. Not
    before: a run that cannot get its nodes (no Docker, an unreachable host) starts no JVM and no
    check server only to say so."""
    if check and (warm_up := getattr(test.checker, "warm_up", None)) is not None:
        warm_up(rec.path)
    yield


@contextlib.contextmanager
def deployed(test: Test, cluster: Cluster, rec: RunRecord) -> Iterator[DB]:
    """The DB set up on every node and the workload's topic made; torn down at the end."""
    rec.enter("deploy")
    db, spec = test.db, test.spec
    if spec.provisioner != "sim":
        _quietly("saving the cluster's system", lambda: ClusterState(spec.cluster).save_system(spec.system))
    try:
        db.setup(cluster)
        check_served(test, cluster, db)
        db.create_topic(spec.topic, spec.partitions, spec.replication_factor)
        yield db
    finally:
        with shielded():
            if spec.leave_running:
                _quietly("closing the DB", db.close)
            else:
                _quietly("tearing down the DB", lambda: db.teardown(cluster))
                _quietly("closing the DB", db.close)


def broker_nodes(cluster: Cluster, db: DB) -> list[Node]:
    """The nodes that run a broker: where clients connect (every node, unless the system places its
    brokers on some of them: one SQLite-backed broker, brokers beside a store on the first node)."""
    placed = getattr(db, "broker_nodes", None)
    return list(placed()) if callable(placed) else list(cluster.nodes)


def check_served(test: Test, cluster: Cluster, db: DB) -> None:
    """The brokers serve every Kafka feature the workload needs, as they advertise them (ApiVersions);
    else one sentence (exit 3), and the deployment is torn down on the way out. Asked of the first
    broker that answers: the nodes run one build."""
    if not test.features or not isinstance(db, HasApiVersions):
        return
    reasons = []
    for node in broker_nodes(cluster, db):
        got = db.api_keys(node)
        if isinstance(got, str):
            reasons.append(f"{node.name}: {got}")
            continue
        check_features(test.system.name if test.system else "under test", test.features, got)
        return
    raise ProvisionError(f"no broker answered ApiVersions ({'; '.join(reasons)})")


@contextlib.contextmanager
def armed(test: Test, cluster: Cluster, db: DB, rec: RunRecord, faults: list[PlannedFault] | None = None
          ) -> Iterator[NemesisRunner]:
    """The fault schedule planned (or `faults`, a shrunk one) and saved; every fault healed on the
    way out, however we leave."""
    if faults is None:
        faults = test.nemesis.plan(cluster.names)
    rec.rd.write_meta(schedule=[f.to_json() for f in faults])
    ctx = NemesisContext(cluster, db, test.spec.topic, test.spec.partitions, test.spec.seed)
    runner = NemesisRunner(ctx, test.nemesis.families, faults, rec.history, test.runtime)
    try:
        yield runner
    finally:
        with shielded():
            _quietly("healing", runner.heal)


def recorded(test: Test, cluster: Cluster, db: DB, runner: NemesisRunner, rec: RunRecord, *,
             progress: bool) -> WorkerPool:
    """Workers and faults together for the time limit; the workers are joined before returning."""
    rec.enter("workload")
    spec, rt = test.spec, test.runtime
    clients = Cluster(broker_nodes(cluster, db), cluster.remotes)
    pool = WorkerPool(test.workload, spec, rec.history, clients, db.client_address, test.connect, rt)
    rec.start_clock()
    t0 = rt.now()
    runner.start()
    pool.start()
    try:
        with live_progress(spec, rec.history, runner, rt.now, enabled=progress):
            while (now := rt.now()) < t0 + spec.time_limit:
                rt.pass_time(min(0.2, t0 + spec.time_limit - now))
                if runner.error is not None:
                    raise ChaosError(f"the nemesis failed: {runner.error}")
    finally:
        with shielded():
            pool.join(30)
    return pool


def healed(test: Test, db: DB, runner: NemesisRunner, rec: RunRecord) -> bool:
    """Every fault healed; then wait (bounded) until every partition has a leader and its full ISR."""
    rec.enter("heal")
    runner.heal()
    spec = test.spec
    return wait_recovered(db, spec.topic, spec.partitions, spec.replication_factor, spec.recovery_timeout,
                          runtime=test.runtime)


def wait_recovered(db: DB, topic: str, partitions: int, replication_factor: int, timeout_s: float, *,
                   settle_s: float = 1.0, poll_s: float = 0.5, runtime: Runtime | None = None) -> bool:
    """Poll until `db.recovered` holds and has held for `settle_s`; False once `timeout_s` has passed
    without a whole picture (one that became whole by then may finish its settle time after it).

    Why a settle time: a broker that restarts re-registers in ZooKeeper a moment before the
    controller reacts to it (it drops the broker from every ISR and leadership, then lets it back),
    so one look at that moment sees a whole cluster that is about to change."""
    rt = runtime or ThreadRuntime()
    deadline = rt.now() + timeout_s
    since: float | None = None
    while True:
        now = rt.now()
        if db.recovered(topic, partitions, replication_factor):
            since = now if since is None else since
            if now - since >= settle_s:
                return True
        else:
            since = None
        if since is None and now >= deadline:
            return False
        rt.pass_time(poll_s)


def drained(test: Test, pool: WorkerPool, db: DB, rec: RunRecord, faults: Sequence[PlannedFault]) -> bool:
    """Whether a transaction hangs (`harness.hanging`, test.json `hanging_transactions`), then the
    final generator. In that order: a read_committed drain takes the LSO of its first moment as each
    key's end, and a transaction a retired process left open holds the LSO until the coordinator
    aborts it — a drain that ran first stopped there and called the committed records past it unseen
    (container seed 36, docs/txn-runs: key 1's end read as 0 with committed records at 2 and 4).
    When the drain gives up, what each broker tells clients about the topic's
    leaders goes beside the run (test.json `drain_gave_up`; the log at `chaos -v`, since the verdict
    already says the drain gave up and sim-search runs seeds by the hundred): a drain that stops
    short leaves acknowledged records unlooked-for (the verdict is then unknown), and the usual
    cause is a client sent to a broker that does not lead. `faults`: the run's schedule, whose clock
    steps lengthen the wait for open transactions (`harness.hanging.patience_for`)."""
    rec.enter("drain")
    topic = test.spec.topic
    if isinstance(db, HasStableEnds):  # before the drain: its read_committed end is the LSO of the moment
        stuck = hanging_transactions(db, topic, test.spec.partitions, test.runtime, patience_for(faults))
        if stuck:
            log.info("transactions hang: %s", ", ".join(
                [f"{topic}-{p} LSO {e.lso} < HW {e.hw}" for p, e in sorted(stuck.partitions.items())]
                + [f"{tid} {state}" for tid, state in sorted(stuck.transactions.items())]))
            rec.rd.write_meta(hanging_transactions=stuck.to_json())
    outcome = pool.drain()
    if not outcome.complete and isinstance(db, HasLeaderViews):
        views = {node: got if isinstance(got, str) else {str(p): v.to_json() for p, v in got.items()}
                 for node, got in db.leader_views(topic).items()}
        log.info("the drain gave up after %d ops; the leaders each broker names for %s: %s", outcome.ops, topic,
                    "; ".join(f"{node}: {v}" for node, v in views.items()))
        rec.rd.write_meta(drain_gave_up={"ops": outcome.ops, "leader_views": views})
    return outcome.complete


def collected(cluster: Cluster, db: DB, rec: RunRecord) -> None:
    """Every replica's log dump and the nodes' logs, into the store."""
    rec.enter("collect")
    for n in cluster.nodes:
        if isinstance(db, HasReplicaDumps):
            rep = rec.path / "replicas" / n.name
            rep.mkdir(parents=True, exist_ok=True)
            try:
                for name, data in db.dump_replicas(n).items():
                    (rep / Path(name).name).write_bytes(data)
            except ChaosError as e:
                log.warning("%s: replica dump failed: %s", n.name, e)
        if isinstance(db, HasLogFiles):
            logs = rec.path / "nodes" / n.name
            logs.mkdir(parents=True, exist_ok=True)
            for name, data in db.logs(n).items():
                (logs / Path(name).name).write_bytes(data)
