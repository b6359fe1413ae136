"""Command-line number types that refuse what click's own let through.

click's `FloatRange` compares with `<`, so `nan` passes every bound (`--time-limit nan` was taken)
and `inf` passes an open upper bound; a negative timeout on a command without bounds ran and then
reported that it "did not finish within -1 s". A number of seconds here is finite and inside its
range, or the command stops at the door with one sentence (exit 3).
"""

from __future__ import annotations

import math
import re
from typing import Any

import click

from kernel.errors import UsageError


class Finite(click.FloatRange):
    """A finite float within [lo, hi] (open at `lo` when `min_open`: a timeout of 0 means nothing)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


def parse_budget(text: str) -> float:
    """"90s", "10m", "1h" or a number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if m is None:
        raise UsageError(f"budget must be a duration such as 60s, 10m or 1h, not {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def parse_rates(text: str) -> tuple[float, ...]:
    """"20" or "20,100": ops/s, each finite and within 0.1..100000."""
    rates = []
    for part in text.split(","):
        try:
            rate = float(part)
        except ValueError:
            raise UsageError(f"--rate must be ops/s or a comma-separated list of them, not {text!r}") from None
        if not math.isfinite(rate) or not 0.1 <= rate <= 100_000:
            raise UsageError(f"--rate {part.strip()} is not between 0.1 and 100000 ops/s")
        rates.append(rate)
    return tuple(rates)
