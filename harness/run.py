"""`run(spec)`: one chaos run, start to finish. The phases, each undone on every exit path:

1. validate the spec and the nemesis names (before anything starts)
2. create the run directory (`test.json` with `complete: false`) and open the history
3. provision the nodes (docker containers, or ssh hosts)
4. deploy ZooKeeper and the brokers (the DB), create the topic
5. run the workers and the nemesis schedule together for the time limit (live progress)
6. heal every fault, wait (bounded) until every partition has a leader and its full ISR again
7. final drain: a fresh consumer reads every key from offset 0 to its end
8. dump every replica's log and copy node logs into the store
9. check the history (results.json, perf/), mark `test.json` complete
10. tear down (unless --leave-running)

Ctrl-C at any point heals, tears down, keeps the history, and raises `Interrupted`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.db.logbroker import LogbrokerDB
from harness.db.settings import BrokerSettings
from harness.errors import ChaosError, Interrupted, ProvisionError, UsageError
from harness.history import HistoryWriter
from harness.provision import PROVISIONERS, get_provisioner
from harness.spec import RunSpec
from harness.ssh import SSHRemote
from harness.store import RunDir

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    valid: Any
    anomalies: list[str]


def preflight(spec: RunSpec) -> RunSpec:
    from nemesis import validate as validate_nemesis
    from workloads.registry import check_workload

    spec.validate()
    check_workload(spec.workload)
    if spec.provisioner not in PROVISIONERS:
        raise UsageError(f"unknown provisioner {spec.provisioner!r}; choose one of: {', '.join(PROVISIONERS)}")
    validate_nemesis(list(spec.nemesis), provisioner=spec.provisioner)
    known_bugs = ("truncate-to-hw", "ack-before-replication", "local-isr-shrink", "stale-epoch-accepted")
    for b in spec.bugs:  # the names of cluster-impl/logbroker/bugs.py (the harness never imports it)
        if b not in known_bugs:
            raise UsageError(f"unknown bug switch {b!r}; known: {', '.join(known_bugs)}")
    return spec


def run(spec: RunSpec, *, progress: bool = True) -> RunOutcome:
    preflight(spec)
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect chatter during partitions is expected
    rd = RunDir.create(spec)
    history = HistoryWriter(rd.history)
    interrupted = False
    with contextlib.ExitStack() as stack:
        stack.callback(history.close)
        try:
            return _run(spec, rd, history, stack, progress)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if interrupted:
                rd.write_meta(complete=False, interrupted=True)
    raise Interrupted(f"interrupted: faults healed, nodes torn down, history kept in {rd.path}")


def _run(spec: RunSpec, rd: RunDir, history: HistoryWriter, stack: contextlib.ExitStack,
         progress: bool) -> RunOutcome:
    from nemesis import build as build_nemesis
    from nemesis.model import NemesisContext
    from nemesis.runner import NemesisRunner
    from nemesis.schedule import plan

    phases = Phases()
    opts: dict[str, Any] = {"hosts": spec.hosts} if spec.provisioner == "ssh" else {}
    prov = get_provisioner(spec.provisioner, spec.cluster, **opts)
    nodes = prov.up(spec.nodes)
    if not spec.leave_running:
        stack.callback(prov.down)
    remotes = {n.name: SSHRemote(n) for n in nodes}
    stack.callback(lambda: [r.close() for r in remotes.values()])
    phases.mark("provision")
    settings = BrokerSettings(replication_factor=spec.replication_factor, min_insync_replicas=spec.min_insync,
                              bugs=tuple(spec.bugs), partitions=spec.partitions, extra=dict(spec.extra))
    db = LogbrokerDB(nodes, remotes, settings)
    if not spec.leave_running:
        stack.callback(_quietly, db.teardown_all)
    else:
        stack.callback(db.close)
    db.setup_all()
    rd.write_meta(nodes=[n.to_json() for n in nodes], image=_image_id())
    _create_topic(db, spec)
    phases.mark("deploy")

    faults = plan(spec.seed, list(spec.nemesis), interval_s=spec.nemesis_interval, time_limit_s=spec.time_limit,
                  node_names=[n.name for n in nodes])
    rd.write_meta(schedule=[f.to_json() for f in faults])
    ctx = NemesisContext(nodes, remotes, db, topic=spec.topic, partitions=spec.partitions)
    nemesis = NemesisRunner(ctx, build_nemesis(list(spec.nemesis)), faults, history)
    stack.callback(_quietly, nemesis.heal)  # a second heal on the way out is harmless

    from harness.progress import live_progress
    from harness.workers import WorkerPool, final_drain

    bootstraps = [f"{n.ip}:9092" for n in nodes]
    pool = WorkerPool(history, bootstraps, spec)
    stack.callback(pool.join, 10.0)
    t0 = time.monotonic()
    nemesis.start()
    pool.start()
    with live_progress(spec, history, nemesis, t0, enabled=progress):
        while time.monotonic() - t0 < spec.time_limit:
            time.sleep(0.2)
            if nemesis.error is not None:
                raise ChaosError(f"the nemesis failed: {nemesis.error}")
    pool.join(30)
    phases.mark("workload")
    nemesis.heal()
    recovered = _wait_recovered(db, spec)
    phases.mark("heal_and_recover")
    drained = final_drain(history, bootstraps, spec, pool.new_process())
    phases.mark("final_drain")
    _collect(db, nodes, remotes, rd)
    phases.mark("collect")
    history.close()
    rd.write_meta(complete=True, recovered=recovered, drained=drained, finished=time.time(),
                  worker_errors=pool.errors, ops=dict(history.counts), phases=phases.seconds)
    from results.check import check_run, print_verdict

    result = check_run(rd.path)
    phases.mark("check")
    rd.write_meta(phases=phases.seconds)
    print_verdict(result)
    return RunOutcome(rd.path, result.exit_code, result.valid, sorted(result.anomalies))


class Phases:
    """Wall-clock seconds per phase, saved in test.json (the harness's own overhead, for bench-run)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = time.monotonic()

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self._t, 3)
        self._t = now


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception as e:  # teardown keeps going; the real error (if any) is already on its way up
        log.warning("cleanup step failed: %s", e)


def _image_id() -> str | None:
    try:
        import docker

        return str(docker.from_env().images.get("chaos-node:latest").id)
    except Exception:
        return None


def _create_topic(db: LogbrokerDB, spec: RunSpec) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from workloads.queue import _quiet

    admin = AdminClient({"bootstrap.servers": db.bootstrap_servers(), "logger": _quiet})
    deadline = time.monotonic() + 60
    while len(admin.list_topics(timeout=10).brokers) < len(db.nodes):
        if time.monotonic() > deadline:
            raise ProvisionError("not every broker joined the cluster in time")
        time.sleep(0.3)
    for f in admin.create_topics([NewTopic(spec.topic, spec.partitions, spec.replication_factor)]).values():
        f.result(30)
    while any(db.leader(spec.topic, p) is None for p in range(spec.partitions)):
        if time.monotonic() > deadline:
            raise ProvisionError(f"topic {spec.topic} got no leaders in time")
        time.sleep(0.3)


def _wait_recovered(db: LogbrokerDB, spec: RunSpec) -> bool:
    """Every partition has a leader and its full ISR again (bounded by --recovery-timeout)."""
    deadline = time.monotonic() + spec.recovery_timeout
    while time.monotonic() < deadline:
        states = [db.partition_state(spec.topic, p) for p in range(spec.partitions)]
        if all(s and s.get("leader", -1) > 0 and len(s.get("isr", [])) >= spec.replication_factor for s in states):
            return True
        time.sleep(0.5)
    return False


def _collect(db: LogbrokerDB, nodes: list[Any], remotes: dict[str, SSHRemote], rd: RunDir) -> None:
    for n in nodes:
        rep = rd.path / "replicas" / n.name
        rep.mkdir(parents=True, exist_ok=True)
        try:
            for name, data in db.dump_replicas(n).items():
                (rep / name).write_bytes(data)
        except ChaosError as e:
            log.warning("%s: replica dump failed: %s", n.name, e)
        logs = rd.path / "nodes" / n.name
        logs.mkdir(parents=True, exist_ok=True)
        for path in db.log_files(n):
            try:
                (logs / Path(path).name).write_bytes(remotes[n.name].get(path))
            except ChaosError as e:
                log.warning("%s: could not copy %s: %s", n.name, path, e)
