"""What compositions are made of: recorded steps, directed cuts, and waits on the cluster's metadata.

A composition (double failover, lagging follower, ...) is a few plain faults in a careful order. Each
step is recorded as the plain op of the family it borrows (`start-kill`, `start-partition`, and the
matching stop) with a step id `"<fault>.<n>"` and `"of": <fault>`, so the history and the plots show
exactly which node was hit when. Waits poll the cluster's metadata through `ClusterView` and stop at
once when the run heals (`ctx.sleep` raises `Cancelled`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kernel import layout
from kernel.db import PartitionState
from kernel.nemesis import NemesisContext, PlannedFault
from kernel.node import Node
from nemesis import grudge
from nemesis.partition import apply, lift

T = TypeVar("T")
POLL_S = 0.1


class Steps:
    """Numbers and records the steps of one composition."""

    def __init__(self, ctx: NemesisContext, fault: PlannedFault) -> None:
        self.ctx = ctx
        self.fault = fault
        self.n = 0
        self.open: dict[str, tuple[str, dict[str, Any]]] = {}

    def start(self, f: str, value: dict[str, Any]) -> str:
        self.n += 1
        sid = f"{self.fault.id}.{self.n}"
        self.ctx.record(f, {**value, "of": self.fault.id}, sid)
        return sid

    def stop(self, sid: str, f: str, value: dict[str, Any]) -> None:
        self.ctx.record(f, {**value, "of": self.fault.id}, sid)

    def lift(self, done: dict[str, Any], names: tuple[str, ...]) -> None:
        """Lift the recorded cuts/mutes `names` that were started, each closed by its stop op."""
        for step in names:
            if step in done:
                sid, c = done[step]
                uncut(self.ctx, c)
                self.stop(sid, "stop-partition", {"kind": c["kind"], "healed": sorted(c["grudge"])})


def heal_all(ctx: NemesisContext, *, resume: bool = False) -> None:
    """A composition's heal: every rule of ours gone, every broker running (and resumed)."""
    from nemesis.partition import PartitionFamily

    PartitionFamily().heal(ctx)
    killer = ctx.killable()
    pauser = ctx.pausable() if resume else None
    for n in ctx.nodes:
        if pauser is not None:
            pauser.resume(n, process="broker")
        killer.start(n)


def cut(ctx: NemesisContext, frm: Node, to: Node) -> dict[str, Any]:
    """`frm` can no longer send to `to`'s broker port (its fetches and requests to `to` are dropped);
    everything else — ZooKeeper, `to`'s requests to `frm`, clients — still flows."""
    g = {to.name: [frm.name]}
    apply(ctx, g, (layout.BROKER_PORT,))
    return {"kind": "cut", "grudge": grudge.describe(g), "ports": [layout.BROKER_PORT]}


def mute(ctx: NemesisContext, listener: Node, speaker: Node) -> dict[str, Any]:
    """`listener` no longer hears the answers of `speaker`'s broker port, while its own requests
    still arrive there (an asymmetric, one-connection-direction loss). A follower muted this way has
    its last fetch counted by the leader — who may then acknowledge what it fetched — but never
    learns the high watermark that fetch moved: its view of what is committed goes stale."""
    g = {listener.name: [speaker.name]}
    apply(ctx, g, from_ports=(layout.BROKER_PORT,))
    return {"kind": "mute", "grudge": grudge.describe(g), "from_ports": [layout.BROKER_PORT]}


def uncut(ctx: NemesisContext, started: dict[str, Any]) -> None:
    """Lift what `cut` or `mute` installed."""
    lift(ctx, started["grudge"], started.get("ports", ()), from_ports=started.get("from_ports", ()))


def wait_for(ctx: NemesisContext, probe: Callable[[], T | None], timeout_s: float) -> T | None:
    """Poll `probe` until it returns something truthy or `timeout_s` passes (None)."""
    waited = 0.0
    while waited <= timeout_s:
        got = probe()
        if got:
            return got
        ctx.sleep(POLL_S)
        waited += POLL_S
    return None


def key_led_elsewhere(ctx: NemesisContext, planned: int, ctrl: Node | None, out: dict[str, Any]
                      ) -> tuple[int, PartitionState | None]:
    """The planned key, or the first after it, whose leader is not the controller `ctrl` (a
    composition about a leader and the controller needs them apart). If every leader is the
    controller (common after failovers), preferred leader elections are asked for first; that
    request is recorded in `out`. (key, None) when no such leader appears."""
    view = ctx.view()

    def pick() -> tuple[int, PartitionState | None]:
        for k in [(planned + i) % ctx.partitions for i in range(ctx.partitions)]:
            s = view.partition(ctx.topic, k)
            if s is not None and s.leader is not None and (ctrl is None or s.leader.name != ctrl.name):
                return k, s
        return planned, None

    key, state = pick()
    if state is None and ctrl is not None:
        out["preferred_election"] = ctx.reassignable().request_preferred_election(
            ctx.topic, list(range(ctx.partitions)))
        picked = wait_for(ctx, lambda: (lambda ks: ks if ks[1] is not None else None)(pick()), 10.0)
        key, state = picked if picked else (planned, None)
    return key, state
