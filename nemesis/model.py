"""The nemesis's plain data: a planned fault (from the seed) and the context faults act in."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.db.logbroker import LogbrokerDB
from harness.node import Node
from harness.remote import Remote


@dataclass(frozen=True, slots=True)
class PlannedFault:
    """One fault of the schedule: what, on which abstract targets, when (s after start) and how long.

    `params` are chosen from the seed (e.g. {"shuffle": ["n3", "n1", ...]} for halves, a node name, a
    clock offset); a target like "the leader of key 2" is resolved when the fault starts.
    """

    family: str
    kind: str
    at_s: float
    duration_s: float
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "kind": self.kind, "at_s": round(self.at_s, 3),
                "duration_s": round(self.duration_s, 3), "params": dict(self.params)}


@dataclass
class NemesisContext:
    nodes: list[Node]
    remotes: Mapping[str, Remote]
    db: LogbrokerDB
    topic: str = "chaos"
    partitions: int = 1
    rng: random.Random = field(default_factory=random.Random)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def resolve(self, target: Mapping[str, Any]) -> Node:
        """"node n3", "leader of key k", "controller" -> a Node now (falls back to the planned node)."""
        role = target.get("role", "node")
        found = None
        if role == "leader":
            found = self.db.leader(self.topic, int(target.get("key", 0)))
        elif role == "controller":
            found = self.db.controller()
        return found or self.node(target["node"])


class Family(Protocol):
    """A fault family. `start` returns what it did (the history op's value); `heal` must be idempotent."""

    name: str
    kinds: tuple[str, ...]

    def plan_params(self, kind: str, rng: random.Random, node_names: list[str]) -> dict[str, Any]: ...

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]: ...

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]: ...

    def heal(self, ctx: NemesisContext) -> None: ...
