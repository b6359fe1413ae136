"""A node's wall clock as its processes see it: libfaketime's offset file (`kernel.layout.FAKETIME_FILE`),
read on every clock call by any process started under `kernel.layout.FAKETIME_RUN` (or the image's
start-broker). The monotonic clock is left alone, as an NTP step leaves it."""

from __future__ import annotations

from kernel import layout
from kernel.remote import Remote


def set_clock(r: Remote, seconds: float) -> None:
    """The node's faked wall clock runs `seconds` ahead (negative: behind) from now on ('+120', '-0.5')."""
    spec = f"{seconds:+.3f}".rstrip("0").rstrip(".")
    r.exec(f"echo '{spec}' > {layout.FAKETIME_FILE}", timeout=15)


def reset_cmd() -> str:
    """The shell that puts the clock back (teardown) and clears what killed processes left behind."""
    return f"rm -f /dev/shm/faketime_shm_*; mkdir -p /etc/chaos; echo +0 > {layout.FAKETIME_FILE}"
