"""Make time.sleep work under libfaketime with FAKETIME_DONT_FAKE_MONOTONIC=1.

CPython 3.11 sleeps with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), which libfaketime turns
into EINVAL in that mode. We sleep with select() against the (unfaked) monotonic clock instead.
"""

import select
import time as _time

_monotonic = _time.monotonic


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = _monotonic() + seconds
    while True:
        left = deadline - _monotonic()
        if left <= 0:
            return
        select.select([], [], [], left)


_time.sleep = _sleep  # type: ignore[assignment]
