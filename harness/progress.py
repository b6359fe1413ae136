"""Live progress on the terminal while a run goes: elapsed/remaining, ops ok/fail/info, active faults
(elsewhere — a log file, a pipe — one line when the workload ends: redraws would fill the file)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.live import Live


@contextlib.contextmanager
def live_progress(spec: Any, history: Any, nemesis: Any, clock: Callable[[], float], *,
                  enabled: bool = True) -> Iterator[None]:
    """`clock`: the run's time (the runtime's: simulated seconds in the simulator)."""
    if not enabled:
        yield
        return
    console = Console(stderr=True)
    t0 = clock()
    if not console.is_terminal:  # a log file or a pipe: one line when the workload ends, not redraws
        try:
            yield
        finally:
            c = history.counts
            console.print(f"{spec.name} seed {spec.seed}: {clock() - t0:.0f} s of workload, ok {c['ok']} "
                          f"fail {c['fail']} info {c['info']}", highlight=False)
        return

    def line() -> str:
        el = clock() - t0
        c = history.counts
        faults = ", ".join(nemesis.active_faults()) or "none"
        return (f"[bold]{spec.name}[/] seed {spec.seed}  {el:5.1f}s / {spec.time_limit:.0f}s  "
                f"ok [green]{c['ok']}[/] fail [red]{c['fail']}[/] info [yellow]{c['info']}[/]  faults: {faults}")

    with live_line(line, console):
        yield


@contextlib.contextmanager
def live_line(line: Callable[[], str], console: Console | None = None) -> Iterator[None]:
    """Redraws `line()` four times a second on the terminal while the block runs, and once at its
    end: `chaos run`'s live line and sim-search's (`harness/fleet/progress.py`)."""
    stop = threading.Event()
    with Live(line(), console=console or Console(stderr=True), refresh_per_second=4, transient=False) as live:
        def tick() -> None:
            while not stop.wait(0.25):
                live.update(line())

        t = threading.Thread(target=tick, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(2)
            live.update(line())
