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
- zombie: the victim (a key's leader or the controller) is paused past its session, then resumed.
- isolate: the victim is cut from every ZooKeeper server (`zookeeper`), or its broker port from its
  peers' and theirs from it (`peers`, `to-port` grudges both ways); clients still reach it.
- move: the operator's requests through the ZooKeeper admin paths, as the container nemesis makes
  them (`logsim.admin.SimAdmin`): a reassignment of one partition, or a preferred election.
- the compositions (double-failover, lagging-follower, stale-orders): `sim_compositions.py`, step by
  step as `nemesis/` does them, each step recorded as the plain op it borrows, with a step id.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kazoo.exceptions import KazooException
from logsim.admin import SimAdmin
from logsim.cluster import SimCluster

from harness.provision.sim_compositions import BROKER_PORT, COMPOSITIONS, ZK_PORT
from kernel.errors import UsageError
from kernel.history import NEMESIS, HistoryWriter, OpType
from kernel.nemesis import PlannedFault, Target
from nemesis import grudge
from nemesis.registry import DEFAULT

SUPPORTED = DEFAULT  # every family, in the registry's order (the schedule draws from them in order)
COMPOSITE = tuple(COMPOSITIONS)
STARTS = {fam: (f"start-{fam}", f"stop-{fam}") for fam in SUPPORTED}


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
        self.admin = SimAdmin(cluster.zk)
        self.partition_count = partitions
        self.faults = faults
        self.history = history
        self.topic = topic
        self.active: dict[int, tuple[PlannedFault, dict[str, Any]]] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self._strobes: dict[int, asyncio.Task[None]] = {}

    # --- targets ---------------------------------------------------------------------------------
    def resolve(self, t: Target) -> dict[str, Any]:
        """`NemesisContext.resolve` on the model's metadata: the node a target hits when the fault starts."""
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
            out: dict[str, Any] = {"kind": f.kind, "steps": {}}
            self.active[f.id] = (f, out)  # filled as the steps go: a heal half-way undoes what was done
            await COMPOSITIONS[f.family][0](self, f, out)
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
            return self._partition(f, out)
        if f.family == "move":
            return self._move(f)
        if f.family == "clock" and f.kind == "reset":
            for n in c.nodes.values():
                n.clock.skew_ms = 0
            return {"kind": "reset", "nodes": list(c.names), "seconds": 0.0}
        hits = {k: self.resolve(t) for k, t in f.targets.items()}
        if f.family in ("zombie", "isolate"):
            return self._single(f, hits["victim"])
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

    def _partition(self, f: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        c = self.c
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
            c.cut_zk(g)
            out["ports"] = ["zookeeper"]
        else:
            loss = float(f.params["loss"]) if f.kind == "flaky" else None
            c.net.add_grudge(g, loss)
            if loss is not None:
                out["loss"] = loss
        out["grudge"] = g
        return out

    def _single(self, f: PlannedFault, hit: dict[str, Any]) -> dict[str, Any]:
        """zombie (`nemesis/zombie.py`) and isolate (`nemesis/isolate.py`): one victim, resolved now."""
        c, v = self.c, hit["node"]
        if f.family == "zombie":
            c.nodes[v].pause()
            return {"kind": f.kind, "node": v, "targets": {"victim": hit}}
        if f.kind == "zookeeper":  # every ZooKeeper server (the victim's own too) drops the victim
            g = {n: [v] for n in c.names}
            c.cut_zk(g)
            ports = [ZK_PORT]
        else:  # the victim's and its peers' broker ports drop each other's requests
            g = {v: [n for n in c.names if n != v], **{n: [v] for n in c.names if n != v}}
            c.net.add_grudge(g, scope="to-port")
            ports = [BROKER_PORT]
        return {"kind": f.kind, "node": v, "grudge": grudge.describe(g), "ports": ports,
                "targets": {"victim": hit}}

    def _assignment(self, p: int) -> dict[str, list[str]] | None:
        ids = self.admin.assignment_ids(self.topic, p)
        if ids is None:
            return None
        return {k: [n for n in map(self.c.node_of, v) if n] for k, v in ids.items()}

    def _move(self, f: PlannedFault) -> dict[str, Any]:
        """`nemesis/move.py`: the operator's request, through the ZooKeeper admin paths."""
        p = int(f.params["key"])
        try:
            if f.kind == "elect":
                parts = list(range(self.partition_count))
                accepted = self.admin.request_preferred_election(self.topic, parts)
                return {"kind": "elect", "partitions": parts, "accepted": accepted}
            current = self._assignment(p)
            rf = len(current["replicas"]) - len(current["adding"]) if current else int(f.params["replicas"])
            names = list(f.params["order"])[:rf]
            self.admin.request_reassignment(self.topic, p, [self.c.nodes[n].broker_id for n in names])
            return {"kind": "reassign", "partition": p, "nodes": names,
                    "from": current["replicas"] if current else None}
        except KazooException as e:  # ZooKeeper out of reach: recorded, the run goes on
            return {"kind": f.kind, "partition": p, "error": f"{type(e).__name__}: {e}"}

    def _stop_move(self, f: PlannedFault) -> dict[str, Any]:
        p = int(f.params["key"])
        try:
            assignment = self._assignment(p)
        except KazooException:
            assignment = None
        st = self.c.partition_state(self.topic, p)
        return {"kind": f.kind, "partition": p, "assignment": assignment, "leader": self.c.leader(self.topic, p),
                "isr": [n for n in map(self.c.node_of, st["isr"]) if n] if st else None}

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
            COMPOSITIONS[f.family][1](self, f, started)
            value = {k: v for k, v in started.items() if k != "steps"}
        elif f.family == "partition":
            g = started["grudge"]
            if f.kind == "zookeeper":
                c.uncut_zk(g)
            else:
                c.net.lift_grudge(g, started.get("loss"))
            value["healed"] = sorted(g)
        elif f.family == "isolate":
            g = started["grudge"]
            if f.kind == "zookeeper":
                c.uncut_zk(g)
            else:
                c.net.lift_grudge(g, scope="to-port")
            value = {"kind": f.kind, "node": started["node"], "healed": True}
        elif f.family == "zombie":
            c.nodes[started["node"]].resume()
            value = {"kind": f.kind, "node": started["node"], "resumed": True}
        elif f.family == "move":
            value = self._stop_move(f)
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
