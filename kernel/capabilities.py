"""What a fault acts through: the capabilities a backend gives the nemesis (STYLE.md 8).

A fault family is written once, against these Protocols, never against a backend: the containers
implement them with iptables, libfaketime, signals and a FUSE file system over SSH
(`harness/db/`), the simulator over its models (`harness/provision/sim.py`). A family names the
capabilities it needs (`Family.needs`); a backend that lacks one refuses the family before anything
starts, with one sentence, instead of recording a fault that never happened.

- `Killable`, `Pausable` (kernel/db.py): kill / start, pause / resume a process;
- `Net`: drop and lift grudges (`Cut`), scoped to ports as iptables rules are; heal them all;
- `Clock`: set a node's wall-clock offset (the monotonic clock never moves);
- `Disk`: a crash that loses what was not fsynced; a log directory lost for good;
- `ClusterView` (kernel/db.py): who leads, who is in sync, who is controller, to resolve targets;
- `Admin` (`Reassignable`, kernel/db.py): the operator's requests (reassign, elect).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kernel.db import ClusterView, Killable, Pausable, Reassignable
from kernel.node import Node

Admin = Reassignable

__all__ = ["Admin", "Clock", "ClusterView", "Cut", "Disk", "Killable", "Net", "Pausable"]


@dataclass(frozen=True, slots=True)
class Cut:
    """A grudge — node -> the nodes whose packets it drops — scoped as an iptables rule is: to the
    dropping node's own `ports` (requests to its services), to the sources' `from_ports` (answers on
    connections it opened), or all traffic when both are empty; `loss` drops only that share.
    `hold` (with `ports`): what is dropped is only delayed — TCP retransmits it and it is served when
    the cut lifts, as long as its connection stays open (iptables gives that on its own; the
    simulator's network, which loses a dropped request, holds it instead). A source may be
    `layout.CLIENTS`, the control host the clients run on. `to_json` is the shape the history
    records on both backends."""

    grudge: Mapping[str, list[str]]
    ports: tuple[int, ...] = ()
    from_ports: tuple[int, ...] = ()
    loss: float | None = None
    hold: bool = False

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"grudge": {k: list(v) for k, v in sorted(self.grudge.items()) if v}}
        if self.ports:
            d["ports"] = list(self.ports)
        if self.from_ports:
            d["from_ports"] = list(self.from_ports)
        if self.loss is not None:
            d["loss"] = self.loss
        if self.hold:
            d["hold"] = True
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Cut:
        """The cut a start op's value describes (what `stop` and the heal lift)."""
        return cls({k: list(v) for k, v in d["grudge"].items()}, tuple(d.get("ports", ())),
                   tuple(d.get("from_ports", ())), d.get("loss"), bool(d.get("hold", False)))


@runtime_checkable
class Net(Protocol):
    """Packet drops between nodes. Cuts stack: lifting one leaves the others (overlapping faults)."""

    def drop(self, cut: Cut) -> None:
        """Install `cut`."""
        ...

    def lift(self, cut: Cut) -> None:
        """Remove exactly what `drop(cut)` installed; idempotent."""
        ...

    def heal_net(self) -> None:
        """Remove every cut; idempotent."""
        ...


@runtime_checkable
class Clock(Protocol):
    """A node's wall clock, offset from the true time (NTP steps); the monotonic clock is left alone."""

    def set_clock(self, node: Node, seconds: float) -> None:
        """The wall clock of `node`'s broker runs `seconds` ahead (negative: behind) from now on."""
        ...


@runtime_checkable
class Disk(Protocol):
    """What a node's disk keeps when things go wrong."""

    def crash(self, node: Node, *, lose_unfsynced: bool) -> dict[str, Any]:
        """Kill the broker; with `lose_unfsynced` its files lose what it wrote and did not fsync (a
        power loss, Jepsen's lazyfs). Returns what was lost, for the history ({} when nothing)."""
        ...

    def wipe(self, node: Node) -> None:
        """The broker's log directory is gone (a replaced disk); call it while the broker is down."""
        ...
