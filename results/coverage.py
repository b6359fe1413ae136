"""Coverage: which of the broker's probes a run hit, read from the `replicas/<node>/probes.json` files
the collect phase stored (containers: the dump tool sums each node's processes; simulator: each
broker's own counts).

A VALID verdict cannot tell "the cluster is correct" from "the run never got near the bug": a run
with a bug switch on whose scenario's probe was not hit is *not exercised*, whatever its verdict
(the exit code stays the verdict's). The files carry the registry they were counted against (names,
descriptions, each switch's probe), so this reads no broker code.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROBES_FILE = "probes.json"


@dataclass(frozen=True)
class Coverage:
    hit: dict[str, int]  # probe -> hits, summed over the nodes
    probes: dict[str, str]  # the registry: probe -> description
    bug_probes: dict[str, str]  # bug switch -> its scenario's probe
    bugs: tuple[str, ...] = ()  # the switches the run had on
    nodes: int = 0  # nodes whose counts were found
    per_node: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def not_hit(self) -> list[str]:
        return [p for p in self.probes if p not in self.hit]

    @property
    def not_exercised(self) -> dict[str, str]:
        """Bug switch -> its probe, for each switch that was on and whose probe was not hit."""
        return {b: self.bug_probes[b] for b in self.bugs if b in self.bug_probes and self.bug_probes[b] not in self.hit}

    def explain(self, bug: str) -> str:
        """One sentence: why a run with `bug` on may have said nothing about it."""
        name = self.bug_probes.get(bug, "?")
        return (f"{bug} was not exercised: its scenario's probe {name} ({self.probes.get(name, 'unknown probe')}) "
                f"was never hit")

    def to_json(self) -> dict[str, Any]:
        return {"hit": dict(sorted(self.hit.items())), "not_hit": self.not_hit,
                "bugs": {b: {"probe": self.bug_probes.get(b), "hit": self.bug_probes.get(b) in self.hit}
                         for b in self.bugs},
                "not_exercised": self.not_exercised, "nodes": self.nodes,
                "descriptions": self.probes}


def merge(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for name, n in part.items():
            out[name] = out.get(name, 0) + int(n)
    return dict(sorted(out.items()))


def read_coverage(replicas: Path | None, bugs: Iterable[str] = ()) -> Coverage | None:
    """The run's coverage, or None when no node stored its probe counts (an older run or broker)."""
    if replicas is None or not replicas.is_dir():
        return None
    per_node: dict[str, dict[str, int]] = {}
    probes: dict[str, str] = {}
    bug_probes: dict[str, str] = {}
    for f in sorted(replicas.glob(f"*/{PROBES_FILE}")):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        per_node[f.parent.name] = {str(k): int(v) for k, v in d.get("counts", {}).items()}
        probes = probes or dict(d.get("probes", {}))
        bug_probes = bug_probes or dict(d.get("bug_probes", {}))
    if not per_node:
        return None
    return Coverage(merge(per_node.values()), probes, bug_probes, tuple(bugs), len(per_node), per_node)


def bugs_of(test_json: Mapping[str, Any] | None) -> list[str]:
    """The bug switches a run had on (test.json keeps them in its run configuration)."""
    cfg = (test_json or {}).get("config")
    return [str(b) for b in cfg.get("bugs", [])] if isinstance(cfg, Mapping) else []


def run_coverage(run_dir: Path) -> Coverage | None:
    """`read_coverage` of a stored run directory, with the bug switches its test.json names."""
    test: Any = None
    with contextlib.suppress(OSError, ValueError):
        test = json.loads((run_dir / "test.json").read_text())
    return read_coverage(run_dir / "replicas", bugs_of(test if isinstance(test, Mapping) else None))


def verdict_note(coverage: Mapping[str, Any] | None, valid: bool | str | None = True) -> str:
    """What to say beside a verdict (from results.json's `coverage`): '' when every switch was exercised.
    Beside anomalies (`valid` False) "not exercised" would contradict the verdict: a switch's probe
    names one scenario of its bug, and a run can reach the bug another way (truncate-to-hw's probe is
    KIP-101's double failover; a follower cutting to its HW after both replicas failed diverges
    without it), so the note then says the anomalies came without that scenario."""
    if not coverage or not coverage.get("not_exercised"):
        return ""
    which = ", ".join(f"{b} (probe {p} not hit)" for b, p in coverage["not_exercised"].items())
    return f"found without the scenario's probe: {which}" if valid is False else f"not exercised: {which}"


def night_coverage(runs: Iterable[tuple[str, Path]], searched: Iterable[tuple[str, Mapping[str, int]]] = (),
                   registry: tuple[Mapping[str, str], Mapping[str, str]] | None = None) -> dict[str, Any] | None:
    """A night's coverage from its (mix, run directory) pairs and its simulator searches' (mix, probe
    -> seeds that hit it) pairs: per mix the probes its runs hit, the night's total, the probes no run
    hit, and each bug switch's probe hit or not; None when nothing stored probe counts. `registry`
    (probe descriptions, each switch's probe) is used when no run directory carries one, as in a night
    of simulator searches alone."""
    per_mix: dict[str, dict[str, int]] = {}
    probes: dict[str, str] = {}
    bug_probes: dict[str, str] = {}
    for mix, run_dir in runs:
        cov = run_coverage(run_dir)
        if cov is None:
            continue
        per_mix[mix] = merge([per_mix.get(mix, {}), cov.hit])
        probes, bug_probes = probes or cov.probes, bug_probes or cov.bug_probes
    for mix, hit in searched:
        per_mix[mix] = merge([per_mix.get(mix, {}), {p: n for p, n in hit.items() if n > 0}])
    if registry is not None:
        probes, bug_probes = probes or dict(registry[0]), bug_probes or dict(registry[1])
    if not per_mix:
        return None
    total = merge(per_mix.values())
    return {"per_mix": {m: sorted(h) for m, h in sorted(per_mix.items())}, "hit": total,
            "never_hit": [p for p in probes if p not in total],
            "switch_probes": {b: {"probe": p, "hit": p in total} for b, p in sorted(bug_probes.items())},
            "descriptions": probes}
