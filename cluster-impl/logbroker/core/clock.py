"""The clock the core is given. `SystemClock` for real brokers; a simulator passes its own."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds (record timestamps; skewed by libfaketime in chaos runs)."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic milliseconds (timeouts, lag; never jumps)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock a test or simulator moves by hand."""

    def __init__(self, start_ms: int = 0) -> None:
        self.t = start_ms

    def now_ms(self) -> int:
        return self.t

    def monotonic_ms(self) -> int:
        return self.t

    def advance(self, ms: int) -> None:
        self.t += ms
