"""A night's cells and what became of them: the plan's matrix (`harness/nightly.py`) and its
sim-search stage (`harness/fleet/nightly_stage.py`) both make `Entry`s for one summary page and one
JUnit file; kept apart from both so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel.spec import RunSpec


@dataclass(frozen=True)
class Cell:
    """One run of the matrix."""

    workload: str
    mix: str
    config: str
    seed: int
    spec: RunSpec

    @property
    def label(self) -> str:
        return f"{self.workload}/{self.mix}/{self.config}"


@dataclass
class Entry:
    """What became of one cell."""

    cell: Cell
    outcome: str  # valid | invalid | unknown | crashed | incomplete (stopped) | skipped | not-run
    run_dir: Path | None = None
    seconds: float = 0.0
    anomalies: list[str] = field(default_factory=list)
    message: str = ""
    exit_code: int = 0
    spark_app: str | None = None
    kind: str = "containers"  # or "sim": one mix of the sim-search stage (its seed: the first of the range)
    probes: dict[str, int] | None = None  # a sim mix's coverage: probe -> seeds that hit it (a run's: its files)

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell.label, "kind": self.kind, "workload": self.cell.workload, "nemeses": self.cell.mix,
                "config": self.cell.config, "seed": self.cell.seed, "outcome": self.outcome,
                "run_dir": str(self.run_dir) if self.run_dir else None, "seconds": round(self.seconds, 1),
                "anomalies": self.anomalies, "message": self.message, "exit_code": self.exit_code,
                "spark_app": self.spark_app, **({"probes": self.probes} if self.probes is not None else {})}
