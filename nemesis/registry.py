"""Fault families by name (one line each), name validation, and the plot metadata of each family.

Names on the command line are a family (`partition`: any of its kinds) or `family-kind`
(`partition-halves`, `kill-controller`, `clock-bump`, `double-failover-kill`, ...). Family names
may contain dashes; a name is split at the longest family it starts with.

The plain families are single faults; the compositions (`double-failover`, `lagging-follower`,
`zombie`, `stale-orders`, `power-loss`, `isolate`) are the fault patterns behind the historic replication bugs of
the seed documents, named by pattern, never by the bug they expose. `DEFAULT` is what `chaos run`
uses when no `--nemesis` is given (`all`, expanded by `resolve` before a run starts): every family,
plain and composed. Adding a family is one file plus one line in `FAMILIES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernel.errors import UsageError
from kernel.nemesis import Family, FaultPerf
from nemesis.client_partition import ClientPartitionFamily
from nemesis.clock import ClockFamily
from nemesis.delayed_produce import DelayedProduceFamily
from nemesis.disk_loss import DiskLossFamily
from nemesis.double_failover import DoubleFailoverFamily
from nemesis.held_markers import HeldMarkersFamily
from nemesis.isolate import IsolateFamily
from nemesis.kill import KillFamily
from nemesis.lagging_follower import LaggingFollowerFamily
from nemesis.lose_unfsynced import LoseUnfsyncedFamily
from nemesis.move import MoveFamily
from nemesis.partition import PartitionFamily
from nemesis.pause import PauseFamily
from nemesis.power_loss import PowerLossFamily
from nemesis.stale_orders import StaleOrdersFamily
from nemesis.zombie import ZombieFamily

FAMILIES: dict[str, Callable[[], Family]] = {
    "partition": PartitionFamily,
    "pause": PauseFamily,
    "clock": ClockFamily,
    "kill": KillFamily,
    "move": MoveFamily,
    "double-failover": DoubleFailoverFamily,
    "lagging-follower": LaggingFollowerFamily,
    "zombie": ZombieFamily,
    "power-loss": PowerLossFamily,
    "isolate": IsolateFamily,
    "stale-orders": StaleOrdersFamily,
    "lose-unfsynced": LoseUnfsyncedFamily,
    "disk-loss": DiskLossFamily,
    "delayed-produce": DelayedProduceFamily,
    "held-markers": HeldMarkersFamily,
    "client-partition": ClientPartitionFamily,
}
#: the families only a transactional workload feels (late produces, transaction markers)
TXN_ONLY = ("delayed-produce", "held-markers")
#: the families named only explicitly: cuts between clients and one broker, the network fault of a
#: broker without peers (`client-net`), came after the default schedule was pinned
NAMED_ONLY = (*TXN_ONLY, "client-partition")
#: `all`: every family but those, so every seed's default schedule stays what it was before they came
DEFAULT = tuple(f for f in FAMILIES if f not in NAMED_ONLY)
#: the name of every family at once (the default of `--nemesis`)
ALL = "all"

def perf() -> dict[str, FaultPerf]:
    """Each family's start/stop op names, label and colour (saved in test.json for perf and plots)."""
    return {name: make().perf for name, make in FAMILIES.items()}


def resolve(names: list[str] | tuple[str, ...],
            refusal: Callable[[Family, str], str | None] | None = None) -> tuple[str, ...]:
    """`names` with `all` replaced by every family (in the registry's order), each name once.

    With `refusal` (why the system under test and the backend cannot act a kind out, or None),
    Jepsen's rule that a fault is drawn only from what the DB supports: `all` and a family named
    whole keep only the kinds that can be acted out (a family of which some are left is named by
    those kinds), while a kind named alone, or a named family of which none is left, is refused in
    one sentence, before anything starts."""
    out: list[str] = []

    def add(n: str) -> None:
        if n not in out:
            out.append(n)

    for name in names:
        implicit = name == ALL
        for n in DEFAULT if implicit else (name,):
            got = split(n)
            if refusal is None or got is None:
                add(n)
                continue
            fam_name, kind = got
            fam = FAMILIES[fam_name]()
            kinds = [kind] if kind is not None else list(fam.kinds)
            reasons = {k: refusal(fam, k) for k in kinds}
            ok = [k for k in kinds if reasons[k] is None]
            if len(ok) == len(kinds):
                add(n)
            elif ok and kind is None:
                for k in ok:
                    add(f"{fam_name}-{k}")
            elif not implicit:
                raise UsageError(next(r for r in reasons.values() if r is not None))
    return tuple(out)


def known_names() -> list[str]:
    out = [ALL]
    for fam, make in FAMILIES.items():
        out.append(fam)
        out.extend(f"{fam}-{k}" for k in make().kinds)
    return out


def split(name: str) -> tuple[str, str | None] | None:
    """(family, kind or None for every kind), or None if `name` names nothing."""
    if name in FAMILIES:
        return name, None
    for fam in sorted(FAMILIES, key=len, reverse=True):
        if name.startswith(fam + "-") and name[len(fam) + 1:] in FAMILIES[fam]().kinds:
            return fam, name[len(fam) + 1:]
    return None


def expand(names: list[str]) -> list[tuple[str, str]]:
    """[(family, kind)] the schedule may draw from."""
    out: list[tuple[str, str]] = []
    for name in names:
        got = split(name)
        if got is None:
            continue
        fam, kind = got
        if kind is None:
            out.extend((fam, k) for k in FAMILIES[fam]().kinds)
        else:
            out.append((fam, kind))
    return out


def validate(names: list[str]) -> None:
    """One short sentence, before anything starts, for an unknown name: the closest known names (a
    typo), else the families, and where every kind is listed. (Whether a backend can act a family
    out is the orchestrator's question: `harness.registry.refusal`, applied through `resolve`.)"""
    import difflib

    known = known_names()
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else f"the families are {', '.join(FAMILIES)};"
            raise UsageError(f"unknown nemesis {name!r}; {hint} `chaos nemeses` lists every kind")


@dataclass(frozen=True)
class FamilyInfo:
    """What `chaos nemeses` shows of one family: its name, whether it is a composition of steps, its
    summary (the first paragraph of its module's docstring) and each kind's line (`about`)."""

    name: str
    composite: bool
    summary: str
    kinds: dict[str, str]


def catalogue() -> list[FamilyInfo]:
    """Every family and kind, read from the families themselves, so the list cannot drift from the code."""
    import sys

    out = []
    for name, make in FAMILIES.items():
        fam = make()
        doc = (sys.modules[type(fam).__module__].__doc__ or "").strip().split("\n\n")[0]
        out.append(FamilyInfo(name, fam.composite, " ".join(doc.split()), dict(fam.about)))
    return out


def build(names: list[str]) -> dict[str, Family]:
    """One instance per family in use (families keep state such as a strobe thread)."""
    return {fam: FAMILIES[fam]() for fam in sorted({f for f, _ in expand(names)})}


def families_needed(names: list[str]) -> dict[str, Family]:
    """The families to heal: those in use (a composition's heal undoes every step it borrows)."""
    return build(names)
