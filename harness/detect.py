"""`chaos detect`: the detection matrix — does the harness catch every planted bug, and stay silent
on the correct cluster?

For each bug switch it runs the fault mixes that should expose it, with fresh seeds, until the
checks report an anomaly of the kind the switch causes (data lost or logs diverged) or a budget of
runs is spent; then it runs the same mixes as often with no switch at all, where any bad anomaly is a
false alarm. It prints and writes a table: switch → mix → runs needed, wall time to detection,
anomaly types; baseline → runs, anomalies.

The mixes are named by fault pattern. Each switch has a *targeted* mix (the composition that
re-creates the historic scenario its seed document describes) and every switch also gets the
*full* default mix with overlapping faults, which is also what finds mistakes nobody planted a
switch for (`--bug` accepts only known switches, but the full mix is the same for all of them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernel.errors import Interrupted
from kernel.spec import DEFAULT_NEMESIS, RunSpec, build_spec

#: anomalies that mean acknowledged data was lost or replicas disagree: what a replication bug causes;
#: and what a transaction bug causes: an aborted transaction's records read (G1a, a torn transaction's
#: stray write among them), a read of uncommitted data, write cycles, a transaction never completed
LOSS_OR_DIVERGENCE = ("lost-write", "unseen", "inconsistent-offsets", "divergent-replicas",
                      "G1a", "precommitted-read", "G0", "G1c", "hanging-transaction")

#: the composition that re-creates each switch's historic scenario (seed documents), then the full mix
TARGETED: dict[str, tuple[str, ...]] = {
    "ack-before-replication": ("kill-leader", "double-failover"),
    "truncate-to-hw": ("double-failover",),
    "local-isr-shrink": ("lagging-follower-kill-leader", "lagging-follower-pause-leader"),
    "stale-epoch-accepted": ("stale-orders",),
    "lost-disk-in-isr": ("disk-loss-last-isr",),
    "lso-ignores-open-txns": ("kill-leader",),
    "marker-ack-before-replication": ("held-markers",),  # markers released to a leader its next leader cannot fetch
    "forget-prepared-txns": ("kill",),  # the coordinator among the victims (sim seed 2)
    "no-txn-verification": ("delayed-produce-leader",),
}
#: the switches of the transaction code: their runs use the transactional workload
TXN_SWITCHES = ("lso-ignores-open-txns", "marker-ack-before-replication", "forget-prepared-txns",
                "no-txn-verification")
#: settings a switch's targeted mix needs: a torn transaction needs the producer's next transaction
#: to write the partition of its delayed write, which two keys make likely (simulator seed 4 shows it)
TARGET_SETTINGS: dict[str, dict[str, Any]] = {"no-txn-verification": {"partitions": 2}}
FULL = DEFAULT_NEMESIS


@dataclass
class Attempt:
    bug: str | None
    mix: str
    seed: int
    exit_code: int
    valid: Any
    anomalies: list[str]  # every type found
    bad: list[str]  # those that make the run invalid
    wall_s: float
    run_dir: str | None
    error: str | None = None
    #: the switch's scenario probe and whether the run hit it (None: no probe counts were stored)
    probe: str | None = None
    exercised: bool | None = None

    @property
    def caught(self) -> bool:
        return any(a in LOSS_OR_DIVERGENCE for a in self.bad)

    @property
    def why_missed(self) -> str:
        """For a switch's run that caught nothing: whether it even reached the switch's scenario."""
        if self.bug is None or self.caught:
            return ""
        if self.exercised is None:
            return "no probe counts stored: cannot tell whether the scenario was reached"
        if not self.exercised:
            return f"not exercised: its probe {self.probe} was never hit"
        return f"exercised (probe {self.probe} hit) yet not caught"


@dataclass
class Row:
    """One line of the matrix: a switch (or the baseline) and what its attempts found."""

    bug: str | None
    attempts: list[Attempt] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        caught = [a for a in self.attempts if a.caught]
        first = next((i for i, a in enumerate(self.attempts) if a.caught), None)
        return {
            "bug": self.bug or "none (baseline)",
            "runs": len(self.attempts),
            "caught_runs": len(caught),
            "runs_to_first_detection": None if first is None else first + 1,
            "wall_s_to_first_detection": None if first is None else round(sum(a.wall_s for a in
                                                                               self.attempts[:first + 1]), 1),
            "mixes_that_caught": sorted({a.mix for a in caught}),
            "anomalies": sorted({t for a in self.attempts for t in a.bad}),
            "unknown_runs": sum(1 for a in self.attempts if a.valid not in (True, False)),
            "max_run_wall_s": round(max((a.wall_s for a in self.attempts), default=0.0), 1),
            "errors": [a.error for a in self.attempts if a.error],
            "misses_not_exercised": sum(1 for a in self.attempts if a.bug and not a.caught and a.exercised is False),
            "misses": [{"seed": a.seed, "mix": a.mix, "why": a.why_missed} for a in self.attempts if a.why_missed],
            "attempts": [asdict(a) for a in self.attempts],
        }


Runner = Callable[[RunSpec], tuple[int, Any, list[str], list[str], Path | None]]


def mixes_for(bug: str | None, mix: str) -> list[tuple[str, tuple[str, ...]]]:
    """The (name, nemeses) mixes to try for `bug`: targeted, full, or both (targeted first)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    if mix in ("targeted", "both") and bug in TARGETED:
        out.append((",".join(TARGETED[bug]), TARGETED[bug]))
    if mix in ("full", "both") or not out:
        out.append(("full", FULL))
    return out


def detect(bugs: list[str], base: dict[str, Any], *, seeds: int, first_seed: int, mix: str, every_seed: bool,
           baseline: bool, run_one: Runner, say: Callable[[str], None]) -> list[Row]:
    """Attempt each bug with `seeds` fresh seeds (stopping at the first detection unless `every_seed`),
    cycling through its mixes; then as many runs with no bug over the same mixes."""
    rows: list[Row] = []
    seed = first_seed
    plan: list[tuple[str | None, list[tuple[str, tuple[str, ...]]]]] = [(b, mixes_for(b, mix)) for b in bugs]
    for bug, mixes in plan:
        row = Row(bug)
        for i in range(seeds):
            name, nemeses = mixes[i % len(mixes)]
            att = _attempt(bug, name, nemeses, seed, base, run_one)
            seed += 1
            row.attempts.append(att)
            say(f"{bug}: seed {att.seed} [{name}] -> {'CAUGHT ' if att.caught else ''}"
                f"{','.join(att.bad) or 'no anomalies'} ({att.error or f'{att.wall_s:.0f} s'})"
                + (f" — {att.why_missed}" if att.why_missed else ""))
            if att.caught and not every_seed:
                break
        rows.append(row)
    if baseline:
        row = Row(None)
        n = sum(len(r.attempts) for r in rows) or seeds
        mixes = [m for _, ms in plan for m in ms] or mixes_for(None, "full")
        for i in range(n):
            name, nemeses = mixes[i % len(mixes)]
            att = _attempt(None, name, nemeses, seed, base, run_one)
            seed += 1
            row.attempts.append(att)
            say(f"baseline: seed {att.seed} [{name}] -> {','.join(att.bad) or 'no anomalies'} "
                f"({'VALID' if att.valid is True else att.valid}, {att.error or f'{att.wall_s:.0f} s'})")
        rows.append(row)
    return rows


def _attempt(bug: str | None, name: str, nemeses: tuple[str, ...], seed: int, base: dict[str, Any],
             run_one: Runner) -> Attempt:
    # A targeted mix re-creates one scenario, one at a time: two copies of a composition overlapping
    # kill each other's nodes (a stale-orders run killed its own receiver before the stale orders
    # arrived). Overlap is the full mix's job.
    alone = {"max_active": 1} if name != "full" else {}
    txn = {"workload": "txn"} if bug in TXN_SWITCHES else {}
    if name != "full" and bug in TARGET_SETTINGS:
        txn.update(TARGET_SETTINGS[bug])
    spec = build_spec({**base, "nemesis": nemeses, "bugs": (bug,) if bug else (), "seed": seed,
                       "name": f"detect-{bug or 'baseline'}", **alone, **txn})
    t0 = time.monotonic()
    try:
        code, valid, anomalies, bad, run_dir = run_one(spec)
        probe, exercised = _exercised(bug, run_dir)
        return Attempt(bug, name, seed, code, valid, anomalies, bad, time.monotonic() - t0,
                       str(run_dir) if run_dir else None, probe=probe, exercised=exercised)
    except Interrupted:  # Ctrl-C or SIGTERM: the run healed and kept its history; the matrix stops too
        raise
    except Exception as e:  # a harness or environment failure: recorded, the matrix goes on
        return Attempt(bug, name, seed, getattr(e, "exit_code", 7), "unknown", [], [], time.monotonic() - t0, None,
                       f"{type(e).__name__}: {e}")


def _exercised(bug: str | None, run_dir: Path | None) -> tuple[str | None, bool | None]:
    """The switch's scenario probe and whether the run hit it, from the run's stored probe counts."""
    if bug is None or run_dir is None:
        return None, None
    from results.coverage import run_coverage

    cov = run_coverage(Path(run_dir))
    if cov is None or bug not in cov.bug_probes:
        return None, None
    return cov.bug_probes[bug], cov.bug_probes[bug] in cov.hit


def table(rows: list[Row]) -> str:
    """The matrix as a Markdown table (what the README carries)."""
    lines = ["| switch | mixes that caught it | caught runs / runs | runs to first detection | "
             "wall time to detection | bad anomaly types | unknown runs | slowest run | misses not exercised |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        j = r.to_json()
        first = j["runs_to_first_detection"]
        lines.append(
            f"| {j['bug']} | {', '.join(j['mixes_that_caught']) or '—'} | {j['caught_runs']} / {j['runs']} | "
            f"{first if first is not None else 'not caught'} | "
            f"{str(j['wall_s_to_first_detection']) + ' s' if first is not None else '—'} | "
            f"{', '.join(j['anomalies']) or 'none'} | {j['unknown_runs']} | {j['max_run_wall_s']} s | "
            f"{j['misses_not_exercised'] if r.bug else '—'} |")
    return "\n".join(lines)


def write(rows: list[Row], out: Path, meta: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**meta, "rows": [r.to_json() for r in rows]}, indent=2, default=str))
    out.with_suffix(".md").write_text(table(rows) + "\n")
