"""Every fault family on real containers running ZooKeeper and brokers, and the heal that follows."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from harness.runtime import ThreadRuntime
from harness.systems.logbroker import layout as bl
from harness.systems.logbroker.db import LogbrokerDB
from harness.systems.logbroker.settings import BrokerSettings
from kernel.db import Cluster
from kernel.history import HistoryWriter
from kernel.nemesis import NemesisContext, PlannedFault, Target
from nemesis import build
from nemesis.runner import NemesisRunner

pytestmark = pytest.mark.docker
PROBE = "timeout 2 bash -c 'exec 3<>/dev/tcp/{ip}/{port}' && echo open || echo closed"


@pytest.fixture
def ctx(docker_cluster) -> Iterator[NemesisContext]:  # type: ignore[no-untyped-def]
    nodes = docker_cluster.nodes
    cluster = Cluster(nodes, {n.name: docker_cluster.remote(n.name) for n in nodes})
    db = LogbrokerDB(BrokerSettings(partitions=1))
    db.setup(cluster)
    c = NemesisContext(cluster, db, topic="chaos", partitions=1)
    try:
        yield c
    finally:
        for fam in build(["partition", "pause", "clock", "kill"]).values():
            fam.heal(c)
        db.teardown_all()


def _db(ctx: NemesisContext) -> LogbrokerDB:
    assert isinstance(ctx.db, LogbrokerDB)
    return ctx.db


def _r(ctx: NemesisContext, node: str):  # type: ignore[no-untyped-def]
    return ctx.cluster.remotes[node]


def _run_fault(ctx: NemesisContext, fault: PlannedFault) -> tuple[object, dict]:  # type: ignore[type-arg]
    fam = build([f"{fault.family}-{fault.kind}"])[fault.family]
    return fam, asyncio.run(fam.start(ctx, fault, {}))  # type: ignore[attr-defined]


def test_partition_one_cuts_broker_and_zookeeper_ports_until_heal(ctx: NemesisContext) -> None:
    n1, _, n3 = ctx.nodes
    fam, started = _run_fault(ctx, PlannedFault(0, "partition", "one", 0, 1, {"victim": Target.of_node("n3")}))
    assert started["grudge"]["n3"] == ["n1", "n2"]
    r3 = _r(ctx, "n3")
    for port in (bl.BROKER_PORT, bl.ZK_CLIENT_PORT):
        assert r3.exec(PROBE.format(ip=n1.ip, port=port)).stdout.strip() == "closed"
        assert _r(ctx, "n1").exec(PROBE.format(ip=n3.ip, port=port)).stdout.strip() == "closed"
    fam.heal(ctx)  # type: ignore[attr-defined]
    for port in (bl.BROKER_PORT, bl.ZK_CLIENT_PORT):
        assert r3.exec(PROBE.format(ip=n1.ip, port=port)).stdout.strip() == "open"


def test_pause_longer_than_session_timeout_expires_the_session(ctx: NemesisContext) -> None:
    n2 = ctx.nodes[1]
    fam, started = _run_fault(ctx, PlannedFault(0, "pause", "one", 0, 1, {"victim": Target.of_node("n2")}))
    pid = _db(ctx).broker_pid(n2)
    assert _r(ctx, "n2").exec(f"ps -o stat= -p {pid}").stdout.strip().startswith("T")
    deadline = time.monotonic() + 30
    while "2" in (_db(ctx)._zk_children("/brokers/ids") or []) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "2" not in (_db(ctx)._zk_children("/brokers/ids") or []), "a paused broker's session must expire"
    asyncio.run(fam.stop(ctx, PlannedFault(0, "pause", "one", 0, 1), started))  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while "2" not in (_db(ctx)._zk_children("/brokers/ids") or []) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "2" in (_db(ctx)._zk_children("/brokers/ids") or []), "after SIGCONT it registers again"


def _broker_log_time(ctx: NemesisContext, node: str) -> float:
    """Make the broker log a line now (a malformed frame), and read the wall-clock time it stamped.

    The line is found by this connection's own port and waited for with a deadline, not a fixed
    sleep: right after a clock fault the broker may still be restarting under its new clock (refused
    connections) or slow to log under load."""
    n = ctx.node(node)
    r = _r(ctx, node)
    deadline = time.monotonic() + 30
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((n.ip, bl.BROKER_PORT), timeout=5) as s:
                port = s.getsockname()[1]
                s.sendall(b"\xff\xff\xff\xff")
        except OSError as e:
            last = f"connect: {e}"
            time.sleep(0.5)
            continue
        inner = time.monotonic() + 5
        while time.monotonic() < inner:
            lines = r.exec(f"grep 'closing connection' {bl.BROKER_LOG} | grep -F ', {port})' || true").stdout
            if m := re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)", lines):
                return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            time.sleep(0.2)
        last = f"no 'closing connection' line for port {port} within 5 s"
    tail = r.exec(f"tail -n 20 {bl.BROKER_LOG}").stdout
    raise AssertionError(f"{node}'s broker logged no line for a bad frame within 30 s ({last}); its log ends:\n{tail}")


def test_clock_bump_moves_the_broker_wall_clock_not_the_hosts(ctx: NemesisContext) -> None:
    before = _broker_log_time(ctx, "n2") - time.time()
    fam, _ = _run_fault(ctx, PlannedFault(0, "clock", "bump", 0, 1, {"n2": Target.of_node("n2")}, {"seconds": 120.0}))
    host_before = time.time()
    skew = _broker_log_time(ctx, "n2") - time.time()
    assert 110 < skew - before < 130, f"broker clock ahead by {skew - before:.1f} s"
    assert abs(time.time() - host_before) < 30
    fam.heal(ctx)  # type: ignore[attr-defined]
    assert abs(_broker_log_time(ctx, "n2") - time.time()) < 5


def test_kill_controller_and_a_new_controller_with_a_higher_epoch(ctx: NemesisContext) -> None:
    db = _db(ctx)
    ctrl, epoch = db.controller(), db.controller_epoch()
    assert ctrl is not None and epoch is not None
    pid = db.broker_pid(ctrl)
    fam, started = _run_fault(ctx, PlannedFault(0, "kill", "controller", 0, 1, {"victim": Target.controller("n1")}))
    assert started["nodes"] == [ctrl.name] and db.broker_pid(ctrl) is None
    assert started["targets"]["victim"] == {"planned": "controller", "node": ctrl.name, "how": "metadata"}
    assert _r(ctx, ctrl.name).exec(f"kill -0 {pid}", check=False).exit_status != 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = db.controller()
        if now is not None and now.name != ctrl.name:
            break
        time.sleep(0.5)
    assert db.controller() not in (None, ctrl) and (db.controller_epoch() or 0) > epoch
    asyncio.run(fam.stop(ctx, PlannedFault(0, "kill", "controller", 0, 1), started))  # type: ignore[attr-defined]
    assert db.broker_pid(ctrl) is not None


def test_an_exception_mid_fault_still_heals_everything(ctx: NemesisContext, tmp_path: Path) -> None:
    faults = [PlannedFault(0, "partition", "halves", 0.1, 60, {}, {"order": ["n1", "n2", "n3"]})]
    history = HistoryWriter(tmp_path / "history.jsonl")
    runner = NemesisRunner(ctx, build(["partition"]), faults, history, ThreadRuntime())
    with pytest.raises(RuntimeError, match="boom"):
        try:
            runner.start()
            deadline = time.monotonic() + 10
            while not runner.active_faults() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert runner.active_faults() == ["partition-halves"]
            raise RuntimeError("boom")
        finally:
            runner.heal()
            history.close()
    for n in ctx.nodes:
        rules = _r(ctx, n.name).exec("iptables -S CHAOS").stdout
        assert "DROP" not in rules
    ops = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [o["f"] for o in ops] == ["start-partition", "stop-partition", "heal"]  # the heal closes the window
    assert all(o["process"] == "nemesis" and o["type"] == "info" for o in ops)


def _wait(pred, timeout: float, what: str, ctx: NemesisContext | None = None):  # type: ignore[no-untyped-def]
    """Poll until `pred()`; on a timeout, the brokers' replication log lines go into the failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.3)
    logs = ""
    for n in (ctx.nodes if ctx is not None else []):
        tail = _r(ctx, n.name).exec(  # type: ignore[union-attr]
            f"grep -E 'chaos-0|controller|reassign|stop' {bl.BROKER_LOG} | grep -v kazoo | tail -25", check=False)
        logs += f"\n--- {n.name}\n{tail.stdout}"
    raise AssertionError(f"timed out waiting for {what}{logs}")


def test_move_reassigns_a_partition_then_elects_its_preferred_leader(ctx: NemesisContext) -> None:
    """A real move on containers: replication factor 2 on 3 nodes, so the spare node gets a replica,
    one old replica is deleted by StopReplica, and the preferred election hands it leadership."""
    from confluent_kafka.admin import AdminClient, NewTopic

    db = _db(ctx)
    admin = AdminClient({"bootstrap.servers": db.bootstrap_servers()})
    for f in admin.create_topics([NewTopic("chaos", 1, 2)]).values():
        f.result(30)
    _wait(lambda: db.leader("chaos", 0), 30, "a leader", ctx)
    before = db.assignment("chaos", 0)
    assert before is not None and len(before["replicas"]) == 2
    old_names = before["replicas"]
    spare = next(n.name for n in ctx.nodes if n.name not in old_names)
    order = [spare, old_names[0], old_names[1]]  # target: the spare (preferred) and the first old replica
    params = {"key": 0, "order": order, "replicas": 2}
    fam, started = _run_fault(ctx, PlannedFault(0, "move", "reassign", 0, 1, {}, params))
    assert started["nodes"] == order[:2] and "error" not in started
    target = started["nodes"]
    _wait(lambda: (db.assignment("chaos", 0) or {}).get("replicas") == target
          and not db.assignment("chaos", 0)["adding"], 60, "the move to finish", ctx)  # type: ignore[index]
    _wait(lambda: (lambda s: s is not None and sorted(n.name for n in s.isr) == sorted(target))(
        db.partition("chaos", 0)), 30, "ISR", ctx)
    # StopReplica goes out after the move is recorded, so the deletion may trail it a little
    _wait(lambda: _r(ctx, old_names[1]).exec(f"test -d {bl.BROKER_DATA}/chaos-0", check=False).exit_status,
          30, "the removed replica's log to be deleted", ctx)
    stopped = asyncio.run(fam.stop(ctx, PlannedFault(0, "move", "reassign", 0, 1, {}, params), started))  # type: ignore[attr-defined]
    assert stopped["assignment"]["replicas"] == target

    fam, started = _run_fault(ctx, PlannedFault(1, "move", "elect", 0, 1, {}, params))
    assert started["accepted"] is True
    _wait(lambda: (lambda n: n is not None and n.name == spare)(db.leader("chaos", 0)), 30,
          "the preferred replica to lead", ctx)
    fam.heal(ctx)  # type: ignore[attr-defined]
