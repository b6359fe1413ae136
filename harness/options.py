"""Command-line number types that refuse what click's own let through.

click's `FloatRange` compares with `<`, so `nan` passes every bound (`--time-limit nan` was taken)
and `inf` passes an open upper bound; a negative timeout on a command without bounds ran and then
reported that it "did not finish within -1 s". A number of seconds here is finite and inside its
range, or the command stops at the door with one sentence (exit 3).
"""

from __future__ import annotations

import math
from typing import Any

import click


class Finite(click.FloatRange):
    """A finite float within [lo, hi] (open at `lo` when `min_open`: a timeout of 0 means nothing)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)
