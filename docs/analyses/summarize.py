"""The table of an analysis: every stored run of a campaign, grouped by configuration and fault mix.

    python docs/analyses/summarize.py STORE [NAME-PREFIX]

Reads each run's `test.json` directory name (`queue-<mix>-<config>`, as `chaos nightly` names a
cell) and `results.json` (its verdict and the anomaly types that made it invalid), and prints a
Markdown table: runs, valid, invalid, unknown (no verdict: a run that did not complete or could not
be judged), and each anomaly type with how many runs had it. It judges nothing itself: the verdicts
are the harness's.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Row:
    runs: int = 0
    valid: int = 0
    invalid: int = 0
    unknown: int = 0
    types: Counter[str] = field(default_factory=Counter)


def rows(store: Path, prefix: str = "") -> dict[str, Row]:
    out: dict[str, Row] = {}
    for test in sorted(store.glob("*/*/test.json")):
        name = test.parent.parent.name
        if not name.startswith(prefix):
            continue
        row = out.setdefault(name, Row())
        row.runs += 1
        results = test.parent / "results.json"
        got = json.loads(results.read_text()) if results.is_file() else {}
        if got.get("valid") is True:
            row.valid += 1
        elif got.get("valid") is False:
            row.invalid += 1
            row.types.update(got.get("bad_error_types", []))
        else:
            row.unknown += 1
    return out


def main() -> None:
    store = Path(sys.argv[1])
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    print("| configuration | runs | valid | invalid | unknown | anomaly types (runs) |")
    print("|---|---|---|---|---|---|")
    for name, r in sorted(rows(store, prefix).items()):
        types = ", ".join(f"{t} ({n})" for t, n in sorted(r.types.items())) or "-"
        print(f"| {name} | {r.runs} | {r.valid} | {r.invalid} | {r.unknown} | {types} |")


if __name__ == "__main__":
    main()
