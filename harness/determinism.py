"""Is a simulated seed deterministic? Two runs of one seed must write the same history, byte for byte.

`--check-determinism` runs the seed a second time, into a scratch store, and compares; `chaos replay`
of a simulated run compares the replay with the original. A difference is a bug in the simulator or
in code that reads something outside it (a wall clock, a thread, an unordered set of strings).
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import replace
from pathlib import Path

from harness.registry import build_test
from harness.run import run
from kernel.nemesis import PlannedFault
from kernel.spec import RunSpec


class Nondeterminism(RuntimeError):
    """Two simulations of one seed wrote different histories."""


def first_difference(a: Path, b: Path) -> tuple[int, str, str] | None:
    """The first line (1-based) where two histories differ, with both lines; None when identical."""
    with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
        for i, (x, y) in enumerate(itertools.zip_longest(fa, fb, fillvalue=""), 1):
            if x != y:
                return i, x.rstrip("\n"), y.rstrip("\n")
    return None


def check_determinism(spec: RunSpec, history: Path, faults: list[PlannedFault] | None = None) -> None:
    """Simulate the seed again (with `faults`, when the first run had them) and compare its history
    with `history`, line by line."""
    with tempfile.TemporaryDirectory(prefix="chaos-sim-") as d:
        again = replace(spec, store=d, check_determinism=False)
        out = run(build_test(again), progress=False, say=lambda _: None, check=False, faults=faults)
        diff = first_difference(history, out.run_dir / "history.jsonl")
    if diff is not None:
        line, a, b = diff
        raise Nondeterminism(f"seed {spec.seed} is not deterministic: history.jsonl line {line} differs\n"
                             f"  first:  {a}\n  second: {b}")
