"""A long search's progress on the terminal: seeds done, seeds/hour, failures, time left (rich, as
`chaos run`'s live line). The numbers come from the search loop; this only shows them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.progress import live_line


@dataclass
class SearchProgress:
    """What the loop has done so far; updated by the loop's thread, read by the display's."""

    budget_s: float
    max_seeds: int | None = None
    seeds: int = 0
    failures: int = 0
    checked: int = 0
    phase: str = "simulating"
    t0: float = field(default_factory=time.monotonic)

    def seeds_per_hour(self) -> float:
        el = time.monotonic() - self.t0
        return self.seeds / el * 3600 if el > 0 else 0.0

    def time_left_s(self) -> float:
        """Until the budget ends, or sooner when `max_seeds` will be reached first at this pace."""
        el = time.monotonic() - self.t0
        left = max(0.0, self.budget_s - el)
        if self.max_seeds and self.seeds:
            left = min(left, (self.max_seeds - self.seeds) * el / self.seeds)
        return left

    def line(self) -> str:
        total = f"/{self.max_seeds}" if self.max_seeds else ""
        left = self.time_left_s()
        return (f"[bold]sim-search[/] {self.phase}: seeds {self.seeds}{total}  "
                f"{self.seeds_per_hour():.0f} seeds/h  failures [red]{self.failures}[/]  "
                f"checked {self.checked}  left {int(left) // 60}m{int(left) % 60:02d}s")


@contextlib.contextmanager
def live_search(progress: SearchProgress, enabled: bool = True) -> Iterator[None]:
    """Shows `progress.line()` four times a second while the block runs (nothing when disabled)."""
    if not enabled:
        yield
        return
    with live_line(progress.line):
        yield
