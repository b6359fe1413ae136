"""`NemesisRunner`: plays a planned schedule during a run, records it, and always heals.

Each fault becomes two history ops with `"process": "nemesis"`, type `info`: `start-<family>` when
it begins and `stop-<family>` when it ends, their values saying the kind and the resolved targets.
`heal()` heals every family (idempotent) and records a `heal` op; it runs on every exit path.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from harness.history import NEMESIS, HistoryWriter, OpType
from nemesis.model import NemesisContext, PlannedFault

log = logging.getLogger(__name__)


class NemesisRunner:
    def __init__(self, ctx: NemesisContext, families: dict[str, Any], faults: list[PlannedFault],
                 history: HistoryWriter) -> None:
        self.ctx = ctx
        self.families = families
        self.faults = faults
        self.history = history
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.active: dict[int, tuple[PlannedFault, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def _sleep_until(self, t: float) -> bool:
        """False if told to stop first."""
        return not self._stop.wait(max(0.0, self._t0 + t - time.monotonic()))

    def _run(self) -> None:
        try:
            events = sorted([(f.at_s, 0, i) for i, f in enumerate(self.faults)]
                            + [(f.at_s + f.duration_s, -1, i) for i, f in enumerate(self.faults)])
            for t, is_stop, i in events:
                if not self._sleep_until(t):
                    return
                if is_stop:
                    self._stop_fault(i)
                else:
                    self._start_fault(i)
        except BaseException as e:  # recorded; the run heals and reports it
            log.exception("nemesis failed")
            self.error = e

    def _start_fault(self, i: int) -> None:
        f = self.faults[i]
        fam = self.families[f.family]
        value = fam.start(self.ctx, f)
        with self._lock:
            self.active[i] = (f, value)
        self.history.append(NEMESIS, OpType.INFO, f"start-{f.family}", value, fault=i)

    def _stop_fault(self, i: int) -> None:
        with self._lock:
            item = self.active.pop(i, None)
        if item is None:
            return
        f, started = item
        value = self.families[f.family].stop(self.ctx, f, started)
        self.history.append(NEMESIS, OpType.INFO, f"stop-{f.family}", value, fault=i)

    def active_faults(self) -> list[str]:
        with self._lock:
            return [f"{f.family}-{f.kind}" for f, _ in self.active.values()]

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def heal(self) -> None:
        """Stop the schedule and heal every family, whatever state it is in; record it."""
        self.stop()
        errors = []
        for name, fam in self.families.items():
            try:
                fam.heal(self.ctx)
            except Exception as e:  # keep healing the others; report after
                errors.append(f"{name}: {e}")
        with self._lock:
            self.active.clear()
        try:
            self.history.append(NEMESIS, OpType.INFO, "heal", {"families": sorted(self.families), "errors": errors})
        except ValueError:
            pass  # the history is already closed: this is the belt-and-braces heal on the way out
        if errors:
            raise RuntimeError("heal failed for " + "; ".join(errors))
