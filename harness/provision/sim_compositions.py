"""The compositions on the simulator: `nemesis/double_failover.py`, `lagging_follower.py` and
`stale_orders.py`, step for step — the same roles picked from the same metadata, the same cuts on the
same ports, the same kills, pauses and waits, recorded as the same step ops (`"<fault>.<n>"`, `"of"`).

The container families are written against the blocking `NemesisContext` (a thread per fault,
`ctx.sleep`); here each is a coroutine on the simulator's loop, so the steps are rewritten, not
shared. Port rules become the network model's scoped grudges (`logsim.network`): a `cut` (frm can
no longer send to to's broker port) is a `to-port` grudge, a `mute` (listener no longer hears
speaker's broker-port answers) a `from-port` grudge; ZooKeeper cuts are the cluster's stacked `cut_zk`.

Each composition fills `out` (the dict the nemesis keeps as the fault's started value) as it goes,
so a heal that cancels it half-way still finds and undoes every step it took.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kazoo.exceptions import KazooException

from kernel.history import NEMESIS, OpType
from kernel.nemesis import PlannedFault

if TYPE_CHECKING:
    from harness.provision.sim_nemesis import SimNemesis

T = TypeVar("T")
POLL_S = 0.1
BROKER_PORT = 9092
ZK_PORT = 2181


class Steps:
    """Numbers and records one composition's steps (`nemesis.steps.Steps`)."""

    def __init__(self, nem: SimNemesis, fault: PlannedFault) -> None:
        self.nem, self.fault, self.n = nem, fault, 0

    def start(self, f: str, value: dict[str, Any]) -> str:
        self.n += 1
        sid = f"{self.fault.id}.{self.n}"
        self.stop(sid, f, value)
        return sid

    def stop(self, sid: str, f: str, value: dict[str, Any]) -> None:
        self.nem.history.append(NEMESIS, OpType.INFO, f, {**value, "of": self.fault.id}, fault=sid)


# --- the port rules ------------------------------------------------------------------------------
def cut(nem: SimNemesis, frm: str, to: str) -> dict[str, Any]:
    """`frm` can no longer send to `to`'s broker port; `to`'s own connections to `frm` still flow."""
    g = {to: [frm]}
    nem.c.net.add_grudge(g, scope="to-port")
    return {"kind": "cut", "grudge": g, "ports": [BROKER_PORT]}


def mute(nem: SimNemesis, listener: str, speaker: str) -> dict[str, Any]:
    """`listener` no longer hears the answers of `speaker`'s broker port; its requests still arrive."""
    g = {listener: [speaker]}
    nem.c.net.add_grudge(g, scope="from-port")
    return {"kind": "mute", "grudge": g, "from_ports": [BROKER_PORT]}


def zk_cut(nem: SimNemesis, victim: str) -> dict[str, Any]:
    """Every ZooKeeper server (the victim's own too) drops the victim's client traffic."""
    g = {n: [victim] for n in nem.c.names}
    nem.c.cut_zk(g)
    return {"kind": "zookeeper", "grudge": g, "ports": [ZK_PORT]}


def uncut(nem: SimNemesis, started: dict[str, Any]) -> None:
    """Lift what `cut`, `mute` or `zk_cut` installed."""
    g = started["grudge"]
    if started["kind"] == "zookeeper":
        nem.c.uncut_zk(g)
    else:
        nem.c.net.lift_grudge(g, scope="from-port" if started.get("from_ports") else "to-port")


def lift(nem: SimNemesis, steps: Steps, done: dict[str, Any], names: tuple[str, ...]) -> None:
    """Lift the recorded cuts `names` that were started, each closed by its stop op."""
    for step in names:
        if step in done:
            sid, c = done.pop(step)
            uncut(nem, c)
            steps.stop(sid, "stop-partition", {"kind": c["kind"], "healed": sorted(c["grudge"])})


def restart(nem: SimNemesis, steps: Steps, sid: str, names: list[str], kind: str = "one") -> None:
    """Start the killed `names` again, in order, and close their kill step `sid`."""
    for name in names:
        nem.c.nodes[name].start()
    steps.stop(sid, "stop-kill", {"kind": kind, "restarted": list(names)})


# --- waits on the metadata -----------------------------------------------------------------------
async def wait_for(probe: Callable[[], T | None], timeout_s: float) -> T | None:
    waited = 0.0
    while waited <= timeout_s:
        got = probe()
        if got:
            return got
        await asyncio.sleep(POLL_S)
        waited += POLL_S
    return None


def _leader_other_than(nem: SimNemesis, key: int, gone: set[str]) -> str | None:
    n = nem.c.leader(nem.topic, key)
    return n if n is not None and n not in gone else None


def _state(nem: SimNemesis, key: int) -> dict[str, Any] | None:
    """The partition's leader, ISR and replicas, as node names (`ClusterView.partition`)."""
    st = nem.c.partition_state(nem.topic, key)
    if st is None:
        return None
    name = nem.c.node_of
    return {"leader": name(int(st["leader"])), "isr": [n for n in map(name, st["isr"]) if n],
            "replicas": [n for n in map(name, st["replicas"] or st["isr"]) if n]}


def _state_without(nem: SimNemesis, key: int, follower: str) -> dict[str, Any] | None:
    """The partition's state once its ISR lacks `follower`, else None (a probe for `wait_for`)."""
    st = _state(nem, key)
    return st if st is not None and follower not in st["isr"] else None


async def key_led_elsewhere(nem: SimNemesis, planned: int, ctrl: str | None, out: dict[str, Any]
                            ) -> tuple[int, dict[str, Any] | None]:
    """`nemesis.steps.key_led_elsewhere`: the planned key or the first after it whose leader is not the
    controller; if every leader is, a preferred election is asked for first. Records the key in
    `out`, and why the composition is skipped when no such partition exists (state None)."""
    parts = nem.partition_count

    def pick() -> tuple[int, dict[str, Any] | None]:
        for k in [(planned + i) % parts for i in range(parts)]:
            s = _state(nem, k)
            if s is not None and s["leader"] is not None and s["leader"] != ctrl:
                return k, s
        return planned, None

    key, state = pick()
    if state is None and ctrl is not None:
        try:
            out["preferred_election"] = nem.admin.request_preferred_election(nem.topic, list(range(parts)))
        except KazooException as e:  # the operator's ZooKeeper is out of reach: the container raises too
            out["preferred_election"] = f"{type(e).__name__}: {e}"
        picked = await wait_for(lambda: (lambda ks: ks if ks[1] is not None else None)(pick()), 10.0)
        key, state = picked if picked else (planned, None)
    out["key"] = key
    if state is None:
        out["skipped"] = "no partition has a leader other than the controller"
    return key, state


# --- double failover -----------------------------------------------------------------------------
def _roles(nem: SimNemesis, planned: int, ctrl: str | None) -> tuple[int, str, str, str] | None:
    fallback = None
    parts = nem.partition_count
    for k in [(planned + i) % parts for i in range(parts)]:
        s = _state(nem, k)
        if s is None or s["leader"] is None:
            continue
        followers = [n for n in s["replicas"] if n != s["leader"] and n in s["isr"]]
        if len(followers) < 2:
            continue
        roles = (k, s["leader"], followers[0], followers[1])
        if ctrl is None or followers[1] != ctrl:
            return roles
        fallback = fallback or roles
    return fallback


async def double_failover(nem: SimNemesis, f: PlannedFault, out: dict[str, Any]) -> None:
    c, steps = nem.c, Steps(nem, f)
    planned = int(f.params["key"])
    ctrl = c.controller()
    out.update(planned_key=planned, controller=ctrl)
    roles = _roles(nem, planned, ctrl)
    if roles is None:
        out["skipped"] = "no partition has a leader and two in-sync followers"
        return
    key, l1, nxt, survivor = roles
    out.update(key=key, first_leader=l1, next_leader=nxt, survivor=survivor)
    m = mute(nem, survivor, l1)
    out["steps"]["mute"] = (steps.start("start-partition", m), m)
    await asyncio.sleep(float(f.params.get("mute_s", 0.0)))
    ct = cut(nem, survivor, nxt)
    out["steps"]["cut"] = (steps.start("start-partition", ct), ct)
    c.nodes[l1].kill()
    out["steps"]["kill-first"] = (steps.start("start-kill", {"kind": "one", "nodes": [l1]}), l1)
    timeout = 4 * max(1.0, float(f.params.get("session_timeout_s", 6.0)))
    elected = await wait_for(lambda: _leader_other_than(nem, key, {l1}), timeout)
    out["elected"] = elected
    if elected is None or elected != nxt:
        return  # nobody elected in time, or not the one predicted: the cut protects nothing
    await asyncio.sleep(float(f.params["settle_s"]))  # the survivor takes its LeaderAndIsr (and truncates)
    c.nodes[nxt].kill()
    out["steps"]["kill-next"] = (steps.start("start-kill", {"kind": "one", "nodes": [nxt]}), nxt)
    out["finally_elected"] = await wait_for(lambda: _leader_other_than(nem, key, {l1, nxt}), timeout)


def stop_double_failover(nem: SimNemesis, f: PlannedFault, started: dict[str, Any]) -> None:
    steps = Steps(nem, f)
    done = started.get("steps", {})
    lift(nem, steps, done, ("cut", "mute"))
    for step in ("kill-next", "kill-first"):  # the last one down comes back first
        if step in done:
            sid, name = done[step]
            restart(nem, steps, sid, [name])


# --- lagging follower ----------------------------------------------------------------------------
async def lagging_follower(nem: SimNemesis, f: PlannedFault, out: dict[str, Any]) -> None:
    c, steps = nem.c, Steps(nem, f)
    planned = int(f.params["key"])
    ctrl = c.controller()
    out.update(planned_key=planned, controller=ctrl)
    key, state = await key_led_elsewhere(nem, planned, ctrl, out)
    if state is None:
        return
    leader = state["leader"]
    followers = [n for n in state["replicas"] if n != leader]
    if not followers:
        out["skipped"] = "the partition has no follower"
        return
    fol = followers[0]
    out.update(leader=leader, follower=fol)
    c1 = cut(nem, fol, leader)
    out["steps"]["cut"] = (steps.start("start-partition", c1), c1)
    if ctrl is not None and f.kind != "kill-isr":
        c2 = cut(nem, leader, ctrl)
        out["steps"]["cut-controller"] = (steps.start("start-partition", c2), c2)
    await asyncio.sleep(float(f.params["lag_s"]))
    out["isr_before_failover"] = list(state["isr"])
    if f.kind == "kill-isr":  # wait for the shrink, as `nemesis/lagging_follower.py` does
        shrunk = await wait_for(lambda: _state_without(nem, key, fol), float(f.params["lag_s"]))
        now = shrunk or _state(nem, key)
        out["follower_out_of_isr"] = shrunk is not None
        isr = now["isr"] if now is not None else state["isr"]
        victims = [leader] + [n for n in isr if n not in (leader, fol)]
        out["isr_when_killed"] = list(isr)
        for v in victims:
            c.nodes[v].kill()
        out["steps"]["down"] = (steps.start("start-kill", {"kind": "isr", "nodes": victims}), victims)
        return
    if f.kind == "kill-leader":
        c.nodes[leader].kill()
        out["steps"]["down"] = (steps.start("start-kill", {"kind": "one", "nodes": [leader]}), [leader])
    else:
        c.nodes[leader].pause()
        out["steps"]["down"] = (steps.start("start-pause", {"kind": "one", "node": leader, "process": "broker"}),
                                [leader])
    after = _state(nem, key)
    out["isr_when_leader_went"] = after["isr"] if after else None


def stop_lagging_follower(nem: SimNemesis, f: PlannedFault, started: dict[str, Any]) -> None:
    steps = Steps(nem, f)
    done = started.get("steps", {})
    lift(nem, steps, done, ("cut", "cut-controller"))
    if "down" in done:
        sid, names = done["down"]
        if f.kind == "pause-leader":
            nem.c.nodes[names[0]].resume()
            steps.stop(sid, "stop-pause", {"kind": "one", "node": names[0], "process": "broker"})
        else:
            restart(nem, steps, sid, names, "isr" if f.kind == "kill-isr" else "one")


# --- stale orders --------------------------------------------------------------------------------
async def stale_orders(nem: SimNemesis, f: PlannedFault, out: dict[str, Any]) -> None:
    c, steps = nem.c, Steps(nem, f)
    key = int(f.params["key"])
    timeout = 4 * float(f.params["session_timeout_s"])
    out["key"] = key
    ctrl = c.controller()
    if ctrl is None or len(c.names) < 3:
        out["skipped"] = "no controller" if ctrl is None else "fewer than three nodes"
        return
    key, state = await key_led_elsewhere(nem, key, ctrl, out)
    if state is None:
        return
    a = state["leader"]
    b = next(n for n in c.names if n not in (ctrl, a))
    out.update(controller=ctrl, restarted=a, receiver=b)
    ct = cut(nem, ctrl, b)
    out["steps"]["cut"] = (steps.start("start-partition", ct), ct)
    c.nodes[a].kill()
    sid = steps.start("start-kill", {"kind": "one", "nodes": [a]})
    out["steps"]["down"] = (sid, [a])  # a heal before the restart below restarts it and closes the step
    out["reelected"] = await wait_for(lambda: _leader_other_than(nem, key, {a}), timeout)
    restart(nem, steps, sid, [a])
    del out["steps"]["down"]
    iso = zk_cut(nem, ctrl)
    out["steps"]["isolate"] = (steps.start("start-partition", iso), iso)
    out["new_controller"] = await wait_for(
        lambda: (lambda n: n if n not in (None, ctrl) else None)(c.controller()), timeout)
    await asyncio.sleep(float(f.params["settle_s"]))  # the new controller's orders go out, writes go on
    lift(nem, steps, out["steps"], ("cut",))


def stop_stale_orders(nem: SimNemesis, f: PlannedFault, started: dict[str, Any]) -> None:
    steps = Steps(nem, f)
    done = started.get("steps", {})
    lift(nem, steps, done, ("cut", "isolate"))
    if "down" in done:  # healed while the killed leader was still down
        sid, names = done.pop("down")
        restart(nem, steps, sid, names)


COMPOSITIONS = {"double-failover": (double_failover, stop_double_failover),
                "lagging-follower": (lagging_follower, stop_lagging_follower),
                "stale-orders": (stale_orders, stop_stale_orders)}
