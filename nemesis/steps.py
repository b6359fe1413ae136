"""What compositions are made of: recorded steps, directed cuts, and waits on the cluster's metadata.

A composition (double failover, lagging follower, ...) is a few plain faults in a careful order. Each
step is recorded as the plain op of the family it borrows (`start-kill`, `start-partition`, and the
matching stop) with a step id `"<fault>.<n>"` and `"of": <fault>`, so the history and the plots show
exactly which node was hit when. Cuts go through the `Net` capability, waits poll the metadata
through `ClusterView`; a wait is an `await`, which the heal cancels on either backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kernel.capabilities import Cut
from kernel.db import PartitionState
from kernel.nemesis import NemesisContext, PlannedFault
from kernel.node import Node

T = TypeVar("T")
POLL_S = 0.1


class Steps:
    """Numbers and records the steps of one composition."""

    def __init__(self, ctx: NemesisContext, fault: PlannedFault) -> None:
        self.ctx = ctx
        self.fault = fault
        self.n = 0

    def start(self, f: str, value: dict[str, Any]) -> str:
        self.n += 1
        sid = f"{self.fault.id}.{self.n}"
        self.ctx.record(f, {**value, "of": self.fault.id}, sid)
        return sid

    def stop(self, sid: str, f: str, value: dict[str, Any]) -> None:
        self.ctx.record(f, {**value, "of": self.fault.id}, sid)

    def lift(self, done: dict[str, Any], names: tuple[str, ...]) -> None:
        """Lift the recorded cuts `names` that were started, each closed by its stop op."""
        for step in names:
            if step in done:
                sid, c = done.pop(step)
                uncut(self.ctx, c)
                self.stop(sid, "stop-partition", {"kind": c["kind"], "healed": sorted(c["grudge"])})

    def kill(self, done: dict[str, Any], step: str, nodes: list[Node], kind: str = "one") -> None:
        """Kill `nodes` as the recorded step `step` (closed by `restart`)."""
        for n in nodes:
            self.ctx.killable().kill(n)
        names = [n.name for n in nodes]
        done[step] = (self.start("start-kill", {"kind": kind, "nodes": names}), names)

    def pause(self, done: dict[str, Any], step: str, node: Node) -> None:
        """Stop `node`'s broker process (SIGSTOP on containers) as the recorded step `step`."""
        process = self.ctx.process_name("broker")
        self.ctx.pausable().pause(node, process=process)
        done[step] = (self.start("start-pause", {"kind": "one", "node": node.name, "process": process}), [node.name])

    def resume(self, done: dict[str, Any], step: str) -> None:
        """Let the broker the pause step `step` stopped run again, and close the step."""
        if step in done:
            sid, names = done.pop(step)
            process = self.ctx.process_name("broker")
            self.ctx.pausable().resume(self.ctx.node(names[0]), process=process)
            self.stop(sid, "stop-pause", {"kind": "one", "node": names[0], "process": process})

    def restart(self, done: dict[str, Any], step: str, kind: str = "one") -> None:
        """Start again what the kill step `step` killed, in order, and close the step."""
        if step in done:
            sid, names = done.pop(step)
            for name in names:
                self.ctx.killable().start(self.ctx.node(name))
            self.stop(sid, "stop-kill", {"kind": kind, "restarted": list(names)})


def heal_all(ctx: NemesisContext, *, resume: bool = False) -> None:
    """A composition's heal: every cut of ours gone, every broker running (and resumed)."""
    ctx.net().heal_net()
    killer = ctx.killable()
    pauser = ctx.pausable() if resume else None
    for n in ctx.nodes:
        if pauser is not None:
            pauser.resume(n, process=ctx.process_name("broker"))
        killer.start(n)


def _drop(ctx: NemesisContext, kind: str, cut: Cut) -> dict[str, Any]:
    ctx.net().drop(cut)
    return {"kind": kind, **cut.to_json()}


def cut(ctx: NemesisContext, frm: Node, to: Node, *, hold: bool = False) -> dict[str, Any]:
    """`frm` can no longer send to `to`'s broker port (its fetches and requests to `to` are dropped);
    everything else — ZooKeeper, `to`'s requests to `frm`, clients — still flows. With `hold` the
    dropped requests are only delayed: they are served when the cut lifts (see `Cut.hold`)."""
    return _drop(ctx, "cut", Cut({to.name: [frm.name]}, ports=(ctx.system.port("broker"),), hold=hold))


def mute(ctx: NemesisContext, listener: Node, speaker: Node) -> dict[str, Any]:
    """`listener` no longer hears the answers of `speaker`'s broker port, while its own requests
    still arrive there (an asymmetric, one-connection-direction loss). A follower muted this way has
    its last fetch counted by the leader — who may then acknowledge what it fetched — but never
    learns the high watermark that fetch moved: its view of what is committed goes stale."""
    return _drop(ctx, "mute", Cut({listener.name: [speaker.name]}, from_ports=(ctx.system.port("broker"),)))


def zk_cut(ctx: NemesisContext, victim: Node) -> dict[str, Any]:
    """Every ZooKeeper server (the victim's own too) drops the victim's client traffic."""
    port = ctx.system.port("metadata-store")
    return _drop(ctx, "zookeeper", Cut({n.name: [victim.name] for n in ctx.nodes}, ports=(port,)))


def uncut(ctx: NemesisContext, started: dict[str, Any]) -> None:
    """Lift what `cut`, `mute` or `zk_cut` installed."""
    ctx.net().lift(Cut.from_json(started))


async def wait_for(ctx: NemesisContext, probe: Callable[[], T | None], timeout_s: float) -> T | None:
    """Poll `probe` until it returns something truthy or `timeout_s` passes (None)."""
    waited = 0.0
    while waited <= timeout_s:
        got = probe()
        if got:
            return got
        await ctx.sleep(POLL_S)
        waited += POLL_S
    return None


def leader_other_than(ctx: NemesisContext, key: int, gone: set[str]) -> Node | None:
    """The key's leader now, unless it is one of `gone` (a probe for `wait_for`)."""
    n = ctx.view().leader(ctx.topic, key)
    return n if n is not None and n.name not in gone else None


async def key_led_elsewhere(ctx: NemesisContext, planned: int, ctrl: Node | None, out: dict[str, Any]
                            ) -> tuple[int, PartitionState | None]:
    """The planned key, or the first after it, whose leader is not the controller `ctrl` (a
    composition about a leader and the controller needs them apart). If every leader is the
    controller (common after failovers), preferred leader elections are asked for first; that
    request is recorded in `out`. (key, None) when no such leader appears; the key goes in `out`."""
    view = ctx.view()

    def pick() -> tuple[int, PartitionState | None]:
        for k in [(planned + i) % ctx.partitions for i in range(ctx.partitions)]:
            s = view.partition(ctx.topic, k)
            if s is not None and s.leader is not None and (ctrl is None or s.leader.name != ctrl.name):
                return k, s
        return planned, None

    key, state = pick()
    if state is None and ctrl is not None:
        try:
            out["preferred_election"] = ctx.reassignable().request_preferred_election(
                ctx.topic, list(range(ctx.partitions)))
        except Exception as e:  # the operator's ZooKeeper is out of reach: recorded, the wait decides
            out["preferred_election"] = f"{type(e).__name__}: {e}"
        picked = await wait_for(ctx, lambda: (lambda ks: ks if ks[1] is not None else None)(pick()), 10.0)
        key, state = picked if picked else (planned, None)
    out["key"] = key
    if state is None:
        out["skipped"] = "no partition has a leader other than the controller"
    return key, state


def isr_without(state: PartitionState | None, follower: str) -> PartitionState | None:
    """`state` once it has an ISR without `follower`, else None (a probe for `wait_for`)."""
    if state is None or any(n.name == follower for n in state.isr):
        return None
    return state


def isr_with(state: PartitionState | None, follower: str) -> PartitionState | None:
    """`state` once its ISR has `follower` (back) in it, else None (a probe for `wait_for`)."""
    if state is None or all(n.name != follower for n in state.isr):
        return None
    return state


def planned_roles(ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> tuple[int, Node, Node, Node] | None:
    """`leader_and_two_followers` from the fault's planned key and the controller of the moment, both
    recorded in `out`; None (and `skipped` recorded) when no key has such roles."""
    view = ctx.view()
    planned = int(fault.params["key"])
    ctrl = view.controller()
    out.update(planned_key=planned, controller=ctrl.name if ctrl else None)
    roles = leader_and_two_followers(view, ctx.topic, ctx.partitions, planned, ctrl)
    if roles is None:
        out["skipped"] = "no partition has a leader and two in-sync followers"
    return roles


def leader_and_two_followers(view: Any, topic: str, partitions: int, planned: int, ctrl: Node | None
                             ) -> tuple[int, Node, Node, Node] | None:
    """(key, leader, next in line, survivor) for the first key from `planned` whose leader has two
    in-sync followers — next in line is the first of them in assignment order, the one the controller
    elects when the leader dies — preferring one whose survivor is not the controller (a composition
    that cuts the survivor off the leader would also cut the controller's requests)."""
    fallback = None
    for k in [(planned + i) % partitions for i in range(partitions)]:
        state = view.partition(topic, k)
        if state is None or state.leader is None:
            continue
        isr = {n.name for n in state.isr}
        followers = [n for n in state.replicas if n.name != state.leader.name and n.name in isr]
        if len(followers) < 2:
            continue
        roles = (k, state.leader, followers[0], followers[1])
        if ctrl is None or followers[1].name != ctrl.name:
            return roles
        fallback = fallback or roles
    return fallback
