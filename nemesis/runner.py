"""`NemesisRunner`: plays a planned schedule during a run, records it, and always heals.

Each fault lives in its own activity (`kernel/runtime.py`: a thread in containers, a task in the
simulator) from its start to its stop, so faults overlap as planned and a composition that takes
seconds (kill a leader, wait for the election, cut a replica, kill again) does not delay the others.
Each fault becomes two history ops with `"process": "nemesis"`, type `info`, and the fault's id in
`"fault"` (faults may overlap, so windows are paired by id, never by name): the family's start op
(`start-partition`, ...) — its value says the kind, the targets as planned and the nodes they
resolved to — and its stop op. A composition's own steps are recorded in between with step ids
`"<fault>.<n>"`. `heal()` cancels what is under way, stops every fault still open as its own stop
would (so every window and every step is closed in the history), heals every family (idempotent)
and records a `heal` op; it runs on every exit path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from kernel.history import NEMESIS, HistoryWriter, OpType
from kernel.nemesis import Family, NemesisContext, PlannedFault
from kernel.runtime import Activity, Runtime

log = logging.getLogger(__name__)


class NemesisRunner:
    def __init__(self, ctx: NemesisContext, families: dict[str, Family], faults: list[PlannedFault],
                 history: HistoryWriter, runtime: Runtime) -> None:
        self.ctx = ctx
        self.families = families
        self.faults = faults
        self.history = history
        self.runtime = runtime
        self.active: dict[int, tuple[PlannedFault, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self._schedule: Activity | None = None
        self._lives: list[Activity] = []
        self._stopping = False
        self._t0 = 0.0
        self._heals = 0
        ctx.record = self._record
        ctx.runtime = runtime

    def _record(self, f: str, value: dict[str, Any], fault: object) -> None:
        self.history.append(NEMESIS, OpType.INFO, f, value, fault=fault)

    def start(self) -> None:
        self._t0 = self.runtime.now()
        self._schedule = self.runtime.spawn("nemesis", self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            for f in sorted(self.faults, key=lambda f: (f.at_s, f.id)):
                await asyncio.sleep(max(0.0, self._t0 + f.at_s - loop.time()))
                if self._stopping:
                    return
                self._lives.append(self.runtime.spawn(f"fault-{f.id}", self._life(f)))
        except Exception as e:  # recorded; the run heals and reports it
            log.exception("nemesis failed")
            self.error = e

    async def _life(self, f: PlannedFault) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._start_fault(f)
            await asyncio.sleep(max(0.0, self._t0 + f.at_s + f.duration_s - loop.time()))
            await self._stop_fault(f.id)
        except Exception as e:  # a cancel (the heal) is not an Exception: the heal stops the fault
            log.exception("fault %d (%s-%s) failed", f.id, f.family, f.kind)
            self.error = e

    async def _start_fault(self, f: PlannedFault) -> None:
        fam = self.families[f.family]
        if fam.composite:
            planned = {"kind": f.kind, "planned": {k: t.describe() for k, t in f.targets.items()}}
            self.history.append(NEMESIS, OpType.INFO, fam.perf.start, planned, fault=f.id)
            out: dict[str, Any] = {"kind": f.kind, "steps": {}}
            with self._lock:
                self.active[f.id] = (f, out)  # filled as the steps go: a heal half-way undoes what was done
            await fam.start(self.ctx, f, out)
            return
        value = await fam.start(self.ctx, f, {})
        with self._lock:
            self.active[f.id] = (f, value)
        self.history.append(NEMESIS, OpType.INFO, fam.perf.start, value, fault=f.id)

    async def _stop_fault(self, fid: int) -> None:
        with self._lock:
            item = self.active.get(fid)
        if item is None:
            return
        f, started = item
        fam = self.families[f.family]
        value = await fam.stop(self.ctx, f, started)
        with self._lock:
            if self.active.pop(fid, None) is None:
                return  # stopped meanwhile by someone else
        self.history.append(NEMESIS, OpType.INFO, fam.perf.stop, value, fault=f.id)

    def active_faults(self) -> list[str]:
        with self._lock:
            return [f"{f.family}-{f.kind}" for f, _ in self.active.values()]

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the schedule and cancel every fault under way (compositions stop at their next await)."""
        self._stopping = True
        lives = [a for a in [self._schedule, *self._lives] if a is not None]
        for a in lives:
            a.cancel()
        self.runtime.join(lives, timeout)

    def heal(self) -> None:
        """Stop the schedule, stop every open fault, heal every family whatever state it is in; record it."""
        self.stop()
        errors = []
        with self._lock:
            open_faults = sorted(self.active)
        for fid in open_faults:  # closed as its own stop would: every window and step ends in the history
            try:
                self.runtime.run(self._stop_fault(fid))
            except Exception as e:  # keep healing; the families' heals below undo it anyway
                errors.append(f"fault {fid}: {e}")
        for name, fam in self.families.items():
            try:
                fam.heal(self.ctx)
            except Exception as e:  # keep healing the others; report after
                errors.append(f"{name}: {e}")
        with self._lock:
            self.active.clear()
        self._heals += 1
        if self._heals == 1 or open_faults or errors:  # a repeat heal with nothing to do is not news
            with contextlib.suppress(ValueError):  # the history is closed: the belt-and-braces heal on the way out
                self.history.append(NEMESIS, OpType.INFO, "heal", {"families": sorted(self.families),
                                                                   "open_faults": open_faults, "errors": errors})
        if errors:
            raise RuntimeError("heal failed for " + "; ".join(errors))
