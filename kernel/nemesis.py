"""Faults as values: targets, planned faults, the context they act in, and the `Family` protocol.

A fault is planned before the run starts, from the seed and against the real cluster shape (node
names, the topic's partition count), and saved in `test.json` exactly as planned. Its *targets* are
values: `node n3`, `leader(2)`, `controller`, `follower(2, lagging)`. A role target cannot be known
until the fault starts (who leads key 2 at second 31?), so it is resolved in one place,
`NemesisContext.resolve`, at that moment, and the history records both the planned target and the
node it hit. Every role target also carries a seeded `fallback` node, used (and recorded as such)
when the metadata cannot say — a partition with no leader, the metadata out of reach.

What a fault may hit comes from the system under test (`kernel.system`): each kind names the roles
and capabilities it needs (`Family.requires`), and the context hands a family the system's ports and
process names by role, so no family names a program.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from kernel.capabilities import Clock, Disk, Net
from kernel.db import DB, Cluster, ClusterView, Killable, Pausable, Reassignable
from kernel.errors import UsageError
from kernel.node import Node
from kernel.runtime import Activity, Runtime
from kernel.system import Need, SystemDecl

Role = Literal["node", "leader", "controller", "follower"]


@dataclass(frozen=True, slots=True)
class Target:
    """Who a fault hits. `node` is the node itself for role "node", else the seeded fallback."""

    role: Role
    node: str
    key: int | None = None
    lagging: bool = False

    @staticmethod
    def of_node(name: str) -> Target:
        return Target("node", name)

    @staticmethod
    def leader(key: int, fallback: str) -> Target:
        return Target("leader", fallback, key)

    @staticmethod
    def controller(fallback: str) -> Target:
        return Target("controller", fallback)

    @staticmethod
    def follower(key: int, fallback: str, *, lagging: bool = False) -> Target:
        return Target("follower", fallback, key, lagging)

    @property
    def live(self) -> bool:
        """True if who it hits depends on the cluster's state when the fault starts."""
        return self.role != "node"

    def describe(self) -> str:
        if self.role == "node":
            return f"node {self.node}"
        if self.role == "controller":
            return "controller"
        if self.role == "leader":
            return f"leader({self.key})"
        return f"follower({self.key}{', lagging' if self.lagging else ''})"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "node": self.node}
        if self.key is not None:
            d["key"] = self.key
        if self.lagging:
            d["lagging"] = True
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Target:
        return cls(d["role"], d["node"], d.get("key"), bool(d.get("lagging", False)))


def victim(kind: str, rng: random.Random, world: PlanWorld) -> Target:
    """The one target of a single-victim kind: `leader` (a seeded key's), `controller`, or else a
    seeded node (which is also the role targets' fallback)."""
    fallback = rng.choice(world.nodes)
    if kind == "leader":
        return Target.leader(rng.randrange(world.partitions), fallback)
    if kind == "controller":
        return Target.controller(fallback)
    return Target.of_node(fallback)


@dataclass(frozen=True, slots=True)
class PlanWorld:
    """What planning may know: the node names, the topic's partition count (keys 0..partitions-1),
    and the cluster's timeouts that compositions must outlast (a zombie's pause must exceed the
    broker's session with its metadata store; a lagging follower must lag longer than the replica
    lag time). The system under test gives the timeouts (its settings record)."""

    nodes: list[str]
    partitions: int
    replication_factor: int = 3
    session_timeout_s: float = 6.0
    replica_lag_s: float = 10.0


@dataclass(frozen=True, slots=True)
class PlannedFault:
    """One fault of the schedule: what, on which targets, when (s after start) and for how long.

    `targets` name the roles a family acts on (e.g. {"victim": leader(2)}); `params` hold the other
    seeded choices (a grudge's node order, a clock offset, restart delays).
    """

    id: int
    family: str
    kind: str
    at_s: float
    duration_s: float
    targets: Mapping[str, Target] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "family": self.family, "kind": self.kind, "at_s": round(self.at_s, 3),
                "duration_s": round(self.duration_s, 3),
                "targets": {k: t.to_json() for k, t in self.targets.items()}, "params": dict(self.params)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PlannedFault:
        return cls(int(d["id"]), d["family"], d["kind"], float(d["at_s"]), float(d["duration_s"]),
                   {k: Target.from_json(t) for k, t in d.get("targets", {}).items()}, dict(d.get("params", {})))


@dataclass(frozen=True, slots=True)
class Plan:
    """What a family's planner returns for one fault. `min_duration_s`: a composition that needs time
    (a pause past the session timeout) says so, and the schedule never gives it less."""

    targets: Mapping[str, Target] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    min_duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class FaultPerf:
    """How plots and perf facts show a family: its start/stop op names, label and colour (Jepsen's
    nemesis `perf`)."""

    start: str
    stop: str
    label: str
    color: str

    def to_json(self) -> dict[str, str]:
        return {"start": self.start, "stop": self.stop, "label": self.label, "color": self.color}


@dataclass(frozen=True, slots=True)
class Resolved:
    """A target as it was hit: the node, and how it was found ("planned", "metadata", "fallback")."""

    target: Target
    node: Node
    how: str

    def to_json(self) -> dict[str, Any]:
        return {"planned": self.target.describe(), "node": self.node.name, "how": self.how}


def _no_record(f: str, value: dict[str, Any], fault: object) -> None:
    return None


@dataclass
class NemesisContext:
    """What a fault acts on: the nodes, the deployed DB (through its capability Protocols,
    `kernel.capabilities`), the topic, and the runtime its background work runs on.

    `record(f, value, fault)` writes a nemesis op into the history: a composition records each step
    it takes as the plain start/stop op of the family it borrows (`start-kill`, `start-partition`),
    with a step id `"<fault>.<n>"`, so plots and checks see exactly what happened and when.
    A step that waits awaits `ctx.sleep` (or `nemesis.steps.wait_for`): on either backend the heal
    cancels it there, and the heal undoes what it did so far."""

    cluster: Cluster
    db: DB
    topic: str = "chaos"
    partitions: int = 1
    seed: int = 0
    record: Callable[[str, dict[str, Any], object], None] = _no_record
    runtime: Runtime | None = None

    async def sleep(self, seconds: float) -> None:
        """Wait between a composition's steps (cancelled at once when the run heals)."""
        await asyncio.sleep(max(0.0, seconds))

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> Activity:
        """Background work of a fault that outlives its start call (a clock strobe)."""
        if self.runtime is None:
            coro.close()
            raise UsageError("this nemesis context has no runtime to run background work on")
        return self.runtime.spawn(name, coro)

    def halt(self, activity: Activity, timeout_s: float = 5.0) -> None:
        """Cancel what `spawn` started and wait (bounded) until it has stopped."""
        activity.cancel()
        if self.runtime is not None:
            self.runtime.join([activity], timeout_s)

    @property
    def nodes(self) -> list[Node]:
        return self.cluster.nodes

    @property
    def system(self) -> SystemDecl:
        """The system under test's declaration (its DB carries it): ports and process names by role."""
        decl: SystemDecl = self.db.system
        return decl

    def process_name(self, role: str) -> str:
        """The name of the process playing `role` (what `Pausable.pause(process=...)` takes)."""
        proc = self.system.process(role)
        if proc is None:
            raise UsageError(f"system {self.system.name} has no {role} process")
        return proc.name

    def node(self, name: str) -> Node:
        return self.cluster.node(name)

    def _as(self, proto: Any) -> Any:
        if not isinstance(self.db, proto):  # runtime_checkable Protocols
            raise UsageError(f"the {type(self.db).__name__} DB cannot do what this fault needs ({proto.__name__})")
        return self.db

    def killable(self) -> Killable:
        """The DB as Killable, or a UsageError naming what it cannot do (and so for the others)."""
        db: Killable = self._as(Killable)
        return db

    def pausable(self) -> Pausable:
        db: Pausable = self._as(Pausable)
        return db

    def view(self) -> ClusterView:
        db: ClusterView = self._as(ClusterView)
        return db

    def reassignable(self) -> Reassignable:
        db: Reassignable = self._as(Reassignable)
        return db

    def net(self) -> Net:
        db: Net = self._as(Net)
        return db

    def clock(self) -> Clock:
        db: Clock = self._as(Clock)
        return db

    def disk(self) -> Disk:
        db: Disk = self._as(Disk)
        return db

    def resolve(self, target: Target) -> Resolved:
        """The one place a target becomes a node, at the moment the fault starts."""
        if target.role == "node":
            return Resolved(target, self.node(target.node), "planned")
        view = self.db if isinstance(self.db, ClusterView) else None
        found: Node | None = None
        if view is not None:
            if target.role == "controller":
                found = view.controller()
            elif target.role == "leader":
                found = view.leader(self.topic, int(target.key or 0))
            else:
                found = self._follower(view, target)
        if found is None:
            return Resolved(target, self.node(target.node), "fallback")
        return Resolved(target, found, "metadata")

    def _follower(self, view: ClusterView, target: Target) -> Node | None:
        """The next in line: the first follower in assignment order (the one the controller would
        elect if the leader died); `lagging` prefers one already out of the ISR."""
        state = view.partition(self.topic, int(target.key or 0))
        if state is None:
            return None
        followers = [n for n in state.replicas if state.leader is None or n.name != state.leader.name]
        isr = {n.name for n in state.isr}
        behind = [n for n in followers if n.name not in isr]
        pool = (behind or followers) if target.lagging else ([n for n in followers if n.name in isr] or followers)
        return pool[0] if pool else None


class Family(Protocol):
    """A fault family: plans its faults from the seed, starts and stops them, heals everything.

    `needs`: the capability Protocols it acts through (`kernel.capabilities`); a backend whose DB
    lacks one refuses the family before the run starts. `start` returns what it did (the history
    op's value, including resolved targets); `stop` undoes one fault; `heal` undoes every fault of
    the family whatever state it is in, and is idempotent. A `composite` family (a composition of
    steps over time) has its start op written before it begins, records each step itself through
    `ctx.record`, and fills `out` as it goes, so a heal half-way finds there what to undo (a plain
    family returns its value and ignores `out`). `start` and `stop` are coroutines: what waits in
    them awaits, and the runtime carries it out (`kernel/runtime.py`).
    """

    name: str
    about: dict[str, str]  # kind -> one line of what a fault of that kind does (`chaos nemeses`)
    requires_all: tuple[Need, ...]  # what every kind needs of the system (a role, a capability over it)
    requires: dict[str, tuple[Need, ...]]  # what a kind needs beyond that
    kinds: tuple[str, ...]  # the keys of `about`, in order
    perf: FaultPerf
    composite: bool
    needs: tuple[type, ...]

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan: ...

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]: ...

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]: ...

    def heal(self, ctx: NemesisContext) -> None: ...


def kind_needs(family: Family, kind: str) -> tuple[Need, ...]:
    """Everything one kind of `family` needs of the system under test: its family's common needs and
    its own, each once."""
    out: list[Need] = []
    for n in (*getattr(family, "requires_all", ()), *getattr(family, "requires", {}).get(kind, ())):
        if n not in out:
            out.append(n)
    return tuple(out)
