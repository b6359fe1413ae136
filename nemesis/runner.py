"""`NemesisRunner`: plays a planned schedule during a run, records it, and always heals.

Each fault lives in its own thread from its start to its stop, so faults overlap as planned and a
composition that takes seconds (kill a leader, wait for the election, cut a replica, kill again)
does not delay the others. Each fault becomes two history ops with `"process": "nemesis"`, type
`info`, and the fault's id in `"fault"` (faults may overlap, so windows are paired by id, never by
name): the family's start op (`start-partition`, ...) — its value says the kind, the targets as
planned and the nodes they resolved to — and its stop op. A composition's own steps are recorded in
between with step ids `"<fault>.<n>"`. `heal()` cancels what is under way, heals every family
(idempotent) and records a `heal` op; it runs on every exit path.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from kernel.history import NEMESIS, HistoryWriter, OpType
from kernel.nemesis import Cancelled, Family, NemesisContext, PlannedFault

log = logging.getLogger(__name__)


class NemesisRunner:
    def __init__(self, ctx: NemesisContext, families: dict[str, Family], faults: list[PlannedFault],
                 history: HistoryWriter) -> None:
        self.ctx = ctx
        self.families = families
        self.faults = faults
        self.history = history
        self._stop = ctx.stopping
        self._thread: threading.Thread | None = None
        self._lives: list[threading.Thread] = []
        self.active: dict[int, tuple[PlannedFault, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self._t0 = 0.0
        self._heals = 0
        ctx.record = self._record

    def _record(self, f: str, value: dict[str, Any], fault: object) -> None:
        self.history.append(NEMESIS, OpType.INFO, f, value, fault=fault)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def _sleep_until(self, t: float) -> bool:
        """False if told to stop first."""
        return not self._stop.wait(max(0.0, self._t0 + t - time.monotonic()))

    def _run(self) -> None:
        try:
            for f in sorted(self.faults, key=lambda f: (f.at_s, f.id)):
                if not self._sleep_until(f.at_s):
                    return
                t = threading.Thread(target=self._lifecycle, args=(f,), name=f"fault-{f.id}", daemon=True)
                self._lives.append(t)
                t.start()
        except BaseException as e:  # recorded; the run heals and reports it
            log.exception("nemesis failed")
            self.error = e

    def _lifecycle(self, f: PlannedFault) -> None:
        try:
            self._start_fault(f)
            if self._sleep_until(f.at_s + f.duration_s):
                self._stop_fault(f.id)
        except Cancelled:
            return  # the heal undoes what the composition did so far
        except BaseException as e:
            log.exception("fault %d (%s-%s) failed", f.id, f.family, f.kind)
            self.error = e

    def _start_fault(self, f: PlannedFault) -> None:
        fam = self.families[f.family]
        if fam.composite:
            planned = {"kind": f.kind, "planned": {k: t.describe() for k, t in f.targets.items()}}
            self.history.append(NEMESIS, OpType.INFO, fam.perf.start, planned, fault=f.id)
            with self._lock:
                self.active[f.id] = (f, planned)
            value = fam.start(self.ctx, f)
            with self._lock:
                if f.id in self.active:
                    self.active[f.id] = (f, value)
            return
        value = fam.start(self.ctx, f)
        with self._lock:
            self.active[f.id] = (f, value)
        self.history.append(NEMESIS, OpType.INFO, fam.perf.start, value, fault=f.id)

    def _stop_fault(self, fid: int) -> None:
        with self._lock:
            item = self.active.pop(fid, None)
        if item is None:
            return
        f, started = item
        fam = self.families[f.family]
        value = fam.stop(self.ctx, f, started)
        self.history.append(NEMESIS, OpType.INFO, fam.perf.stop, value, fault=f.id)

    def active_faults(self) -> list[str]:
        with self._lock:
            return [f"{f.family}-{f.kind}" for f, _ in self.active.values()]

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the schedule and cancel every fault under way (compositions stop at their next step)."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.1, deadline - time.monotonic()))
        for t in self._lives:
            t.join(max(0.1, deadline - time.monotonic()))

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
            healed = sorted(self.active)
            self.active.clear()
        self._heals += 1
        if self._heals == 1 or healed or errors:  # a repeat heal with nothing to do is not news
            with contextlib.suppress(ValueError):  # the history is closed: the belt-and-braces heal on the way out
                self.history.append(NEMESIS, OpType.INFO, "heal",
                                    {"families": sorted(self.families), "open_faults": healed, "errors": errors})
        if errors:
            raise RuntimeError("heal failed for " + "; ".join(errors))
