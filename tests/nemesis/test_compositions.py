"""Every composition on real containers: it starts, records its steps as plain ops, stops, and heals.

One deployment (3 nodes, ZooKeeper, brokers, a 3-partition RF 3 topic) serves the module; each test
plays one composition through the same calls the runner makes, then heals and waits until every
partition has a leader and its full ISR again, with no iptables rule of ours left on any node.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from harness.phases import wait_recovered
from harness.systems.logbroker import layout as bl
from harness.systems.logbroker.db import LogbrokerDB
from kernel import layout
from kernel.db import Cluster
from kernel.nemesis import NemesisContext, PlannedFault, PlanWorld
from kernel.rng import rng
from nemesis.registry import FAMILIES

pytestmark = [pytest.mark.docker, pytest.mark.slow]
WORLD = PlanWorld(["n1", "n2", "n3"], 3, 3, session_timeout_s=4.0, replica_lag_s=5.0)


def _recovered(db: LogbrokerDB, timeout: float = 60.0) -> bool:
    return wait_recovered(db, "chaos", 3, 3, timeout)


def _broker_logs(cluster: Cluster, lines: int = 60) -> str:
    """The end of every broker's log, for a failure message (these tests race real processes).

    The per-partition lines a broker writes on every leadership change (150 of them for the
    transaction log alone) are left out: they filled the whole tail, and the controller's and the
    warnings' lines that explain a failure were cut off (a CI failure of power-loss showed nothing)."""
    noise = r"(manager: \S+: (leader|follower) (of|at)|coordinator: \S+: loaded)"
    state = (f"echo \"broker pid: $(cat {bl.BROKER_PIDFILE} 2>/dev/null || echo none)"
             f" alive: $(kill -0 $(cat {bl.BROKER_PIDFILE} 2>/dev/null) 2>/dev/null && echo yes || echo no)"
             f" data mounted: $(mountpoint -q {bl.BROKER_DATA} && echo yes || echo no)\"; "
             f"tail -n 5 {layout.LAZYFS_LOG} 2>/dev/null; ")
    return "\n".join(f"--- {n.name}\n" + cluster.remotes[n.name].exec(
        state + f"grep -Ev '{noise}' {bl.BROKER_LOG} | tail -n {lines}", check=False).stdout
        for n in cluster.nodes)


def _play(name: str, kind: str, deployed: tuple[LogbrokerDB, Cluster], seed: int = 1
          ) -> tuple[list[tuple[str, dict[str, Any], object]], dict[str, Any], dict[str, Any]]:
    db, cluster = deployed
    assert _recovered(db), "the cluster is healthy before the fault"
    fam = FAMILIES[name]()
    p = fam.plan(kind, rng(seed, "test", name), WORLD)
    fault = PlannedFault(7, name, kind, 0.0, 1.0, p.targets, p.params)
    ops: list[tuple[str, dict[str, Any], object]] = []
    ctx = NemesisContext(cluster, db, "chaos", 3, seed, record=lambda f, v, fid: ops.append((f, v, fid)))
    try:
        started = asyncio.run(fam.start(ctx, fault, {"kind": kind, "steps": {}}))
        stopped = asyncio.run(fam.stop(ctx, fault, started))
    finally:
        fam.heal(ctx)
    assert _recovered(db), \
        f"{name}: every partition has a leader and its full ISR after the heal\n{_broker_logs(cluster)}"
    for n in cluster.nodes:
        assert "DROP" not in cluster.remotes[n.name].exec("iptables -S CHAOS", check=False).stdout
    return ops, started, stopped


def _paired(ops: list[tuple[str, dict[str, Any], object]]) -> None:
    """Every step recorded with a step id of this fault, each start closed by its stop."""
    opened: dict[object, str] = {}
    for f, v, fid in ops:
        assert str(fid).startswith("7.") and v["of"] == 7
        if f.startswith("start-"):
            opened[fid] = f.removeprefix("start-")
        else:
            assert opened.pop(fid) == f.removeprefix("stop-")
    assert not opened, f"steps never stopped: {opened}"


def test_double_failover(deployed: tuple[LogbrokerDB, Cluster]) -> None:
    ops, started, stopped = _play("double-failover", "kill", deployed)
    assert "skipped" not in started, started
    assert [f for f, _, _ in ops[:6]] == ["start-pause", "start-partition", "stop-pause", "start-partition",
                                          "start-kill", "start-kill"]
    hold, mute, cut = ops[0][1], ops[1][1], ops[3][1]
    # the next leader is held while the survivor fetches ahead of the HW; the survivor stops hearing
    # the first leader's answers before the next one runs again; then it cannot reach the next leader
    assert hold["node"] == started["next_leader"] and ops[2][1]["node"] == started["next_leader"]
    assert mute["kind"] == "mute" and mute["grudge"] == {started["survivor"]: [started["first_leader"]]}
    assert cut["kind"] == "cut" and cut["grudge"] == {started["next_leader"]: [started["survivor"]]}
    assert ops[4][1]["nodes"] == [started["first_leader"]] and ops[5][1]["nodes"] == [started["next_leader"]]
    assert started["elected"] == started["next_leader"]
    assert stopped["first_leader"] == started["first_leader"]
    _paired(ops)


def test_held_markers(deployed: tuple[LogbrokerDB, Cluster]) -> None:
    """The survivor's requests to the leader are held until the controller has taken it out of the
    ISR; the next leader is muted before the cut lifts (so the released markers find no follower able
    to fetch them); the leader is killed and the next in line elected."""
    ops, started, stopped = _play("held-markers", "kill", deployed)
    assert "skipped" not in started, started
    assert [f for f, _, _ in ops[:4]] == ["start-partition", "start-partition", "stop-partition", "start-kill"]
    cut, mute = ops[0][1], ops[1][1]
    assert cut["kind"] == "cut" and cut.get("hold") and cut["grudge"] == {started["leader"]: [started["survivor"]]}
    assert mute["kind"] == "mute" and mute["grudge"] == {started["next_leader"]: [started["leader"]]}
    assert ops[2][1]["kind"] == "cut" and ops[3][1]["nodes"] == [started["leader"]]
    assert started["survivor_out_of_isr"] and started["elected"] == started["next_leader"], started
    assert stopped["leader"] == started["leader"]
    _paired(ops)


def test_lagging_follower(deployed: tuple[LogbrokerDB, Cluster]) -> None:
    ops, started, _ = _play("lagging-follower", "kill-leader", deployed)
    assert "skipped" not in started, started
    kinds = [f for f, _, _ in ops]
    assert kinds[0] == "start-partition" and "start-kill" in kinds
    assert started["follower"] != started["leader"] != started["controller"]
    _paired(ops)


def test_lagging_follower_kill_isr(deployed: tuple[LogbrokerDB, Cluster]) -> None:
    """The controller drops the cut-off follower from the ISR, then every other ISR member dies: the
    follower is the only live replica, and a correct controller does not elect it (no unclean
    election is configured), so the key has no leader until the ISR comes back."""
    db, cluster = deployed
    assert _recovered(db)
    fam = FAMILIES["lagging-follower"]()
    p = fam.plan("kill-isr", rng(3, "test", "kill-isr"), WORLD)
    fault = PlannedFault(7, "lagging-follower", "kill-isr", 0.0, 1.0, p.targets, p.params)
    ops: list[tuple[str, dict[str, Any], object]] = []
    ctx = NemesisContext(cluster, db, "chaos", 3, 3, record=lambda f, v, fid: ops.append((f, v, fid)))
    leaders: list[str | None] = []
    try:
        started = asyncio.run(fam.start(ctx, fault, {"kind": fault.kind, "steps": {}}))
        assert "skipped" not in started, started
        assert started["follower"] not in started["isr_when_killed"], \
            f"the controller took the laggard out: {started}\n{_broker_logs(cluster)}"
        deadline = time.monotonic() + WORLD.session_timeout_s + 4
        while time.monotonic() < deadline:
            st = ctx.view().partition("chaos", started["key"])
            leaders.append(st.leader.name if st is not None and st.leader is not None else None)
            time.sleep(0.5)
        stopped = asyncio.run(fam.stop(ctx, fault, started))
    finally:
        fam.heal(ctx)
    assert started["follower"] not in leaders, f"a replica outside the ISR was elected: {leaders}"
    kill = next(v for f, v, _ in ops if f == "start-kill")
    assert kill["kind"] == "isr" and started["leader"] in kill["nodes"] and started["follower"] not in kill["nodes"]
    assert sorted(stopped["isr_when_killed"]) == sorted(started["isr_when_killed"])
    _paired(ops)
    assert _recovered(db), "every partition has a leader and its full ISR after the heal"


def test_stale_orders(deployed: tuple[LogbrokerDB, Cluster]) -> None:
    ops, started, _ = _play("stale-orders", "controller", deployed)
    assert "skipped" not in started, started
    assert started["new_controller"] not in (None, started["controller"]), "the controller was replaced"
    assert [f for f, _, _ in ops][:3] == ["start-partition", "start-kill", "stop-kill"]
    _paired(ops)


@pytest.mark.parametrize(("name", "kind"), [("zombie", "controller"), ("zombie", "leader"),
                                            ("power-loss", "majority"), ("isolate", "zookeeper"),
                                            ("isolate", "peers")])
def test_single_step_compositions(name: str, kind: str, deployed: tuple[LogbrokerDB, Cluster]) -> None:
    ops, started, stopped = _play(name, kind, deployed)
    assert ops == [], "a single-step composition is recorded by the runner's own start/stop ops"
    assert started["kind"] == kind and stopped["kind"] == kind
    if name == "power-loss":
        assert len(started["nodes"]) == 2 and stopped["restarted"] == [n for n in stopped["restarted"]]
