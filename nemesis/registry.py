"""Fault families by name (one line each), name validation, and building a nemesis for a run.

Names on the command line are a family (`partition`: any of its kinds) or `family-kind`
(`partition-halves`, `kill-controller`, `clock-bump`, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.errors import UsageError
from nemesis.clock import ClockFamily
from nemesis.kill import KillFamily
from nemesis.move import MoveFamily
from nemesis.partition import PartitionFamily
from nemesis.pause import PauseFamily

FAMILIES: dict[str, Callable[[], Any]] = {
    "partition": PartitionFamily,
    "pause": PauseFamily,
    "clock": ClockFamily,
    "kill": KillFamily,
    "move": MoveFamily,
}

#: plot label and colour per family (the `perf` of Jepsen's nemesis packages)
PERF: dict[str, dict[str, str]] = {
    "partition": {"label": "partition", "color": "#E9A4A0"},
    "pause": {"label": "pause", "color": "#C5A0E9"},
    "clock": {"label": "clock skew", "color": "#A0C8E9"},
    "kill": {"label": "kill", "color": "#E9C3A0"},
    "move": {"label": "move", "color": "#A0E9B4"},
}

#: families that need something only our node image has
NEEDS_IMAGE = {"clock": "libfaketime preloaded by the node image's start-broker"}


def known_names() -> list[str]:
    out = []
    for fam, cls in FAMILIES.items():
        out.append(fam)
        out.extend(f"{fam}-{k}" for k in cls.kinds)
    return out


def expand(names: list[str]) -> list[tuple[str, str]]:
    """[(family, kind)] the schedule may draw from."""
    out: list[tuple[str, str]] = []
    for name in names:
        if name in FAMILIES:
            out.extend((name, k) for k in FAMILIES[name].kinds)  # type: ignore[attr-defined]
            continue
        fam, _, kind = name.partition("-")
        if fam in FAMILIES and kind in FAMILIES[fam].kinds:  # type: ignore[attr-defined]
            out.append((fam, kind))
    return out


def validate(names: list[str], *, provisioner: str = "docker") -> None:
    """One clear sentence, before anything starts, for an unknown name or an impossible family."""
    known = known_names()
    for name in names:
        if name not in known:
            raise UsageError(f"unknown nemesis {name!r}; known: {', '.join(known)}")
        fam = name.partition("-")[0]
        if provisioner != "docker" and fam in NEEDS_IMAGE:
            raise UsageError(f"nemesis {name!r} needs {NEEDS_IMAGE[fam]}, which the {provisioner!r} "
                             "provisioner's hosts do not have; use --provisioner docker")


def build(names: list[str]) -> dict[str, Any]:
    """One instance per family in use (families keep state such as a strobe thread)."""
    return {fam: FAMILIES[fam]() for fam in {f for f, _ in expand(names)}}
