"""The nemesis on the simulator: the same planned schedule (`nemesis.schedule.plan`), the same family
and kind names and the same history ops, acted out as the simulator's faults instead of iptables
rules, signals and libfaketime.

- partition: a grudge in the network model (`nemesis.grudge`'s shapes); `zookeeper` cuts only the
  victim's ZooKeeper traffic; `flaky` drops the planned share of packets.
- pause: the victim's process is held (its callbacks and timers); `zookeeper`: its ZooKeeper server.
- kill: the victims' processes die (files keep what was written) and restart at the fault's end.
- clock: the victims' wall clocks are skewed by the planned seconds (`strobe` flips it each period).
- power-loss: the victims lose power: what their logs did not fsync is lost or torn
  (`logsim.disk`); they restart in the planned order, after the planned delays.
- stale-orders: the composition of `nemesis/stale_orders.py`, step by step (each step recorded as
  the plain op it borrows, with a step id): the controller's traffic to a broker B is cut (held,
  as TCP does), a leader A elsewhere is killed and restarted once re-elected, the controller is
  cut from ZooKeeper until another takes over, then the cut lifts and the old orders reach B.

Other families (`move` and the other compositions) are not acted out yet: `preflight` refuses them for
the sim provisioner with that sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from logsim.cluster import SimCluster

from kernel.errors import UsageError
from kernel.history import NEMESIS, HistoryWriter, OpType
from kernel.nemesis import PlannedFault, Target
from nemesis import grudge

SUPPORTED = ("partition", "pause", "kill", "clock", "power-loss", "stale-orders")
COMPOSITE = ("stale-orders",)
STARTS = {"stale-orders": ("start-stale-orders", "stop-stale-orders"),
          "partition": ("start-partition", "stop-partition"), "pause": ("start-pause", "stop-pause"),
          "kill": ("start-kill", "stop-kill"), "clock": ("start-clock", "stop-clock"),
          "power-loss": ("start-power-loss", "stop-power-loss")}


def check_supported(names: list[str]) -> None:
    """One sentence for a family the simulator does not act out yet."""
    from nemesis.registry import expand

    missing = sorted({fam for fam, _ in expand(names) if fam not in SUPPORTED})
    if missing:
        raise UsageError(f"the sim provisioner does not act out {', '.join(missing)} yet; "
                         f"choose from: {', '.join(SUPPORTED)}")


class SimNemesis:
    def __init__(self, cluster: SimCluster, faults: list[PlannedFault], history: HistoryWriter, topic: str,
                 partitions: int) -> None:
        self.c = cluster
        self.partition_count = partitions
        self.faults = faults
        self.history = history
        self.topic = topic
        self.active: dict[int, tuple[PlannedFault, dict[str, Any]]] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self._strobes: dict[int, asyncio.Task[None]] = {}

    # --- targets ---------------------------------------------------------------------------------
    def resolve(self, t: Target) -> dict[str, Any]:
        found: str | None = None
        if t.role == "node":
            return {"planned": t.describe(), "node": t.node, "how": "planned"}
        if t.role == "controller":
            found = self.c.controller()
        elif t.role == "leader":
            found = self.c.leader(self.topic, int(t.key or 0))
        else:
            st = self.c.partition_state(self.topic, int(t.key or 0))
            if st is not None:
                followers = [r for r in st["replicas"] if r != st["leader"]]
                behind = [r for r in followers if r not in st["isr"]]
                pool = (behind or followers) if t.lagging else ([r for r in followers if r in st["isr"]] or followers)
                found = self.c.node_of(pool[0]) if pool else None
        if found is None:
            return {"planned": t.describe(), "node": t.node, "how": "fallback"}
        return {"planned": t.describe(), "node": found, "how": "metadata"}

    # --- the schedule ----------------------------------------------------------------------------
    def start(self) -> None:
        t0 = self.c.loop.time()
        for f in sorted(self.faults, key=lambda f: (f.at_s, f.id)):
            self.tasks.append(self.c.loop.spawn(None, self._life(f, t0), name=f"fault {f.id}"))

    async def _life(self, f: PlannedFault, t0: float) -> None:
        loop = self.c.loop
        await asyncio.sleep(max(0.0, t0 + f.at_s - loop.time()))
        if f.family in COMPOSITE:
            planned = {"kind": f.kind, "planned": {k: t.describe() for k, t in f.targets.items()}}
            self.history.append(NEMESIS, OpType.INFO, STARTS[f.family][0], planned, fault=f.id)
            self.active[f.id] = (f, planned)
            value = await self._stale_orders(f)
            if f.id in self.active:
                self.active[f.id] = (f, value)
        else:
            value = self._start(f)
            self.active[f.id] = (f, value)
            self.history.append(NEMESIS, OpType.INFO, STARTS[f.family][0], value, fault=f.id)
        await asyncio.sleep(max(0.0, t0 + f.at_s + f.duration_s - loop.time()))
        await self._stop(f.id)

    def _start(self, f: PlannedFault) -> dict[str, Any]:
        c = self.c
        out: dict[str, Any] = {"kind": f.kind}
        if f.family == "partition":
            if f.kind in ("halves", "bridge"):
                order = list(f.params["order"])
                g = grudge.halves(order) if f.kind == "halves" else grudge.bridge(order)
            else:
                hit = self.resolve(f.targets["victim"])
                out["targets"] = {"victim": hit}
                g = (grudge.one_way(hit["node"], c.names) if f.kind == "one-way"
                     else grudge.isolate(hit["node"], c.names))
            g = grudge.describe(g)
            if f.kind == "zookeeper":
                c.zk_drops.update((dst, src) for dst, srcs in g.items() for src in srcs)
                out["ports"] = ["zookeeper"]
            else:
                loss = float(f.params["loss"]) if f.kind == "flaky" else None
                c.net.add_grudge(g, loss)
                if loss is not None:
                    out["loss"] = loss
            out["grudge"] = g
            return out
        if f.family == "clock" and f.kind == "reset":
            for n in c.nodes.values():
                n.clock.skew_ms = 0
            return {"kind": "reset", "nodes": list(c.names), "seconds": 0.0}
        hits = {k: self.resolve(t) for k, t in f.targets.items()}
        nodes = sorted({h["node"] for h in hits.values()})
        if any(t.live for t in f.targets.values()):
            out["targets"] = hits
        out["nodes"] = nodes
        for name in nodes:
            node = c.nodes[name]
            if f.family == "pause":
                if f.kind == "zookeeper":
                    c.zk.paused_servers.add(name)
                else:
                    node.pause()
            elif f.family == "kill":
                node.kill()
            elif f.family == "power-loss":
                c.power_loss(name)
            elif f.family == "clock":
                node.clock.skew_ms = int(float(f.params["seconds"]) * 1000)
        if f.family == "clock":
            out["seconds"] = float(f.params["seconds"])
            if f.kind == "strobe":
                self._strobes[f.id] = c.loop.spawn(None, self._strobe(nodes, float(f.params["seconds"]),
                                                                      float(f.params["period_s"])))
        return out

    # --- compositions ----------------------------------------------------------------------------
    def _step(self, f: PlannedFault, n: int, op: str, value: dict[str, Any]) -> str:
        sid = f"{f.id}.{n}"
        self.history.append(NEMESIS, OpType.INFO, op, {**value, "of": f.id}, fault=sid)
        return sid

    async def _wait_for(self, probe: Any, timeout_s: float) -> Any:
        waited = 0.0
        while waited <= timeout_s:
            got = probe()
            if got:
                return got
            await asyncio.sleep(0.1)
            waited += 0.1
        return None

    async def _stale_orders(self, f: PlannedFault) -> dict[str, Any]:
        c = self.c
        key = int(f.params["key"])
        timeout = 4 * float(f.params["session_timeout_s"])
        out: dict[str, Any] = {"kind": f.kind, "key": key, "steps": {}}
        ctrl = c.controller()
        if ctrl is None:
            return {**out, "skipped": "no controller"}
        keys = [(key + i) % self.partitions() for i in range(self.partitions())]
        led = [(k, c.leader(self.topic, k)) for k in keys]
        k, a = next(((k, n) for k, n in led if n is not None and n != ctrl), (key, None))
        if a is None:
            return {**out, "skipped": "no partition has a leader other than the controller"}
        b = next(n for n in c.names if n not in (ctrl, a))
        out.update(key=k, controller=ctrl, restarted=a, receiver=b)
        cut = {b: [ctrl]}
        c.net.add_grudge(cut)
        out["steps"]["cut"] = self._step(f, 1, "start-partition", {"kind": "cut", "grudge": cut, "ports": [9092]})
        c.nodes[a].kill()
        self._step(f, 2, "start-kill", {"kind": "one", "nodes": [a]})
        moved = await self._wait_for(lambda: (lambda n: n if n not in (None, a) else None)(c.leader(self.topic, k)),
                                     timeout)
        out["reelected"] = moved
        c.nodes[a].start()
        self._step(f, 2, "stop-kill", {"kind": "one", "restarted": [a]})
        iso = {n: [ctrl] for n in c.names if n != ctrl}
        c.zk_drops.update((n, ctrl) for n in iso)
        out["steps"]["isolate"] = self._step(f, 3, "start-partition", {"kind": "zookeeper", "grudge": iso,
                                                                         "ports": ["zookeeper"]})
        out["new_controller"] = await self._wait_for(
            lambda: (lambda n: n if n not in (None, ctrl) else None)(c.controller()), timeout)
        await asyncio.sleep(float(f.params["settle_s"]))
        c.net.lift_grudge(cut)
        self._step(f, 1, "stop-partition", {"kind": "cut", "healed": sorted(cut)})
        del out["steps"]["cut"]
        return out

    def _stop_stale_orders(self, f: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        c = self.c
        steps = started.get("steps", {})
        ctrl, receiver = started.get("controller"), started.get("receiver")
        if "cut" in steps and ctrl and receiver:
            c.net.lift_grudge({receiver: [ctrl]})
            self._step(f, 1, "stop-partition", {"kind": "cut", "healed": [receiver]})
        if "isolate" in steps and ctrl:
            c.zk_drops.difference_update((n, ctrl) for n in c.names)
            self._step(f, 3, "stop-partition", {"kind": "zookeeper", "healed": sorted(n for n in c.names if n != ctrl)})
        if started.get("restarted"):
            c.nodes[started["restarted"]].start()
        return {k: v for k, v in started.items() if k != "steps"}

    def partitions(self) -> int:
        return self.partition_count

    async def _strobe(self, nodes: list[str], seconds: float, period: float) -> None:
        on = False
        while True:
            await asyncio.sleep(period)
            for n in nodes:
                self.c.nodes[n].clock.skew_ms = int(seconds * 1000) if on else 0
            on = not on

    async def _stop(self, fid: int) -> None:
        item = self.active.pop(fid, None)
        if item is None:
            return
        f, started = item
        c = self.c
        value: dict[str, Any] = {"kind": f.kind}
        if f.family in COMPOSITE:
            value = self._stop_stale_orders(f, started)
        elif f.family == "partition":
            g = started["grudge"]
            if f.kind == "zookeeper":
                c.zk_drops.difference_update((dst, src) for dst, srcs in g.items() for src in srcs)
            else:
                c.net.lift_grudge(g, started.get("loss"))
            value["healed"] = sorted(g)
        elif f.family == "pause":
            for n in started["nodes"]:
                if f.kind == "zookeeper":
                    c.zk.paused_servers.discard(n)
                else:
                    c.nodes[n].resume()
            value["nodes"] = started["nodes"]
        elif f.family == "kill":
            for n in started["nodes"]:
                c.nodes[n].start()
            value["nodes"] = started["nodes"]
        elif f.family == "power-loss":
            order, delays = list(f.params["order"]), list(f.params["delays_s"])
            for n, d in zip(order, delays, strict=False):
                await asyncio.sleep(float(d))
                c.nodes[n].start()
            value["nodes"] = order
        elif f.family == "clock":
            strobe = self._strobes.pop(f.id, None)
            if strobe is not None:
                strobe.cancel()
            for n in started.get("nodes", []):
                c.nodes[n].clock.skew_ms = 0
            value = {"kind": "reset", "nodes": started.get("nodes", [])}
        self.history.append(NEMESIS, OpType.INFO, STARTS[f.family][1], value, fault=f.id)

    async def heal(self) -> None:
        """Cancel the schedule, undo every fault (restart and resume every node), record a heal op."""
        for t in self.tasks:
            t.cancel()
        open_faults = sorted(self.active)
        for fid in list(self.active):
            with contextlib.suppress(Exception):
                await self._stop(fid)
        for s in self._strobes.values():
            s.cancel()
        c = self.c
        c.net.heal()
        c.zk_drops.clear()
        c.zk.paused_servers.clear()
        for n in c.nodes.values():
            n.clock.skew_ms = 0
            n.resume()
            n.start()
        self.history.append(NEMESIS, OpType.INFO, "heal", {"families": sorted({f.family for f in self.faults}),
                                                           "open_faults": open_faults, "errors": []})
