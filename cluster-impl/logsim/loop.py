"""`SimLoop`: a deterministic asyncio event loop with virtual time — the scheduler model.

Model:
- Time is virtual. When no callback is ready, the clock jumps to the earliest timer; nothing ever
  sleeps for real, and a simulated minute costs only the work done in it.
- Order is a function of the seed. Ready callbacks run first-in first-out (asyncio's promise,
  which the broker's code relies on); timers that fall due together are ordered by a seeded
  sub-microsecond jitter added when they are set, so different seeds explore different
  interleavings and one seed always the same one.
- Every callback belongs to the node incarnation whose context it was scheduled from (`NODE`, a
  context variable that tasks inherit). A *paused* incarnation's callbacks and timers are held, in
  order, and released when it resumes — its tasks wake with the view they had (SIGSTOP/SIGCONT).
  A *dead* incarnation's callbacks are dropped and never run again (SIGKILL: no `finally`, no
  cleanup, nothing more written).
- No threads, no sockets, no selector: `call_soon_threadsafe` is `call_soon`. If nothing is ready
  and no timer is set while the caller still waits, every task is blocked for good: `Deadlock`.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import inspect
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from logsim.rng import stream

log = logging.getLogger(__name__)
T = TypeVar("T")

#: the node incarnation the running code belongs to (None: the harness, clients, the network)
NODE: contextvars.ContextVar[Incarnation | None] = contextvars.ContextVar("logsim_node", default=None)


class Deadlock(RuntimeError):
    """Every task waits and no timer will ever wake one."""


@dataclass(eq=False)
class Incarnation:
    """One life of a node's process, from start to kill: what its callbacks are tied to."""

    node: str
    number: int
    paused: bool = False
    dead: bool = False
    held: list[asyncio.Handle] = field(default_factory=list)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    #: the node's coverage probe counts (`logbroker.probes`): the same map for every incarnation of a node
    probes: dict[str, int] = field(default_factory=dict)

    def context(self) -> contextvars.Context:
        ctx = contextvars.copy_context()
        ctx.run(NODE.set, self)
        return ctx


def _bury(h: asyncio.Handle) -> None:
    """A dead incarnation's callback is dropped (SIGKILL: it never runs); if it was a task's step,
    the task is buried."""
    task = getattr(h._callback, "__self__", None)  # type: ignore[attr-defined]
    if isinstance(task, asyncio.Task):
        _bury_task(task)


def _bury_task(task: asyncio.Task[Any]) -> None:
    """A task of a dead incarnation: it will not be logged as destroyed while pending, and if it never
    started — a connection that reached the process as it died — its coroutine is closed (and the
    task cancelled, for the drain at shutdown), so it does not warn that it was never awaited when
    collected (before, kills printed `coroutine 'BrokerServer._serve' was never awaited`)."""
    task._log_destroy_pending = False  # type: ignore[attr-defined]
    coro = task.get_coro()
    if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
        task.cancel()
        coro.close()


class SimLoop(asyncio.BaseEventLoop):
    def __init__(self, seed: int, jitter: random.Random | None = None) -> None:
        """`jitter`: the tie-breaking stream (default: `rng.stream(seed, "sim", "loop")`)."""
        super().__init__()
        self._now = 0.0
        self._jitter = jitter or stream(seed, "sim", "loop")
        self._seq = 0
        self.callbacks_run = 0
        self.set_exception_handler(self._on_exception)
        self.errors: list[str] = []
        self.draining = False  # shutting down: every task runs to its end, dead or paused

    # --- the clock -------------------------------------------------------------------------------
    def time(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        """asyncio's `call_at`, but the heap holds (when, sequence, handle): comparing tuples of floats
        is done in C, `TimerHandle.__lt__` in Python (a fifth of a busy run's scheduling cost). Equal
        times, which the jitter makes all but impossible, run in the order they were set."""
        when += self._jitter.random() * 1e-7
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        self._seq += 1
        heapq.heappush(self._scheduled, (when, self._seq, timer))  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    # --- no I/O, no threads ----------------------------------------------------------------------
    def _write_to_self(self) -> None:
        return None

    def _process_events(self, event_list: Any) -> None:
        return None

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                             context: contextvars.Context | None = None) -> asyncio.Handle:
        return self.call_soon(callback, *args, context=context)

    # --- one turn --------------------------------------------------------------------------------
    def _run_once(self) -> None:
        sched: list[tuple[float, int, asyncio.TimerHandle]] = self._scheduled  # type: ignore[attr-defined]
        ready = self._ready  # type: ignore[attr-defined]
        while sched and sched[0][2]._cancelled:  # type: ignore[attr-defined]
            heapq.heappop(sched)[2]._scheduled = False  # type: ignore[attr-defined]
            self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
        if not ready:
            if not sched:
                if self._stopping:  # type: ignore[attr-defined]
                    return
                raise Deadlock(f"every task is blocked at t={self._now:.3f} s and no timer is set")
            self._now = max(self._now, sched[0][0])
        now = self._now
        while sched and sched[0][0] <= now:
            h = heapq.heappop(sched)[2]
            h._scheduled = False  # type: ignore[attr-defined]
            if h.cancelled():
                self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
                continue
            ready.append(h)
        for _ in range(len(ready)):
            h = ready.popleft()
            if h._cancelled:  # type: ignore[attr-defined]
                continue
            ctx = h._context  # type: ignore[attr-defined]
            inc = ctx.get(NODE) if ctx is not None else None
            if inc is not None and not self.draining:
                if inc.dead:
                    _bury(h)
                    continue
                if inc.paused:
                    inc.held.append(h)
                    continue
            self.callbacks_run += 1
            h._run()  # type: ignore[attr-defined]

    # --- nodes -----------------------------------------------------------------------------------
    def spawn(self, inc: Incarnation | None, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        """A task that belongs to `inc` (None: to no node)."""
        ctx = inc.context() if inc is not None else contextvars.copy_context()
        if inc is None:
            ctx.run(NODE.set, None)
        task = self.create_task(coro, name=name, context=ctx)
        if inc is not None:
            inc.tasks.add(task)
            task.add_done_callback(inc.tasks.discard)
        return task

    def call_in(self, inc: Incarnation | None, delay: float, fn: Callable[..., object], *args: Any) -> None:
        """`fn(*args)` after `delay` simulated seconds, as part of `inc` (held while it is paused)."""
        ctx = inc.context() if inc is not None else None
        if delay <= 0:
            self.call_soon(fn, *args, context=ctx)
        else:
            self.call_later(delay, fn, *args, context=ctx)

    def pause(self, inc: Incarnation) -> None:
        inc.paused = True

    def resume(self, inc: Incarnation) -> None:
        if not inc.paused:
            return
        inc.paused = False
        held, inc.held = inc.held, []
        self._ready.extend(held)  # type: ignore[attr-defined]

    def kill(self, inc: Incarnation) -> None:
        """The incarnation's callbacks never run again; its pending tasks are left unfinished."""
        inc.dead = True
        for h in inc.held:
            _bury(h)
        inc.held.clear()
        for t in inc.tasks:
            _bury_task(t)
        inc.tasks.clear()

    def shutdown(self) -> None:
        """Cancel every task and let each finish (the `finally` blocks of dead nodes' tasks too, so
        nothing is left to be collected half-run), then close the loop."""
        self.draining = True
        tasks = [t for t in asyncio.all_tasks(self) if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            self.run_until_complete(asyncio.wait(tasks, timeout=60))
        self.close()

    def _on_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        msg = str(context.get("message", ""))
        exc = context.get("exception")
        line = f"{msg}: {exc!r}" if exc is not None else msg
        self.errors.append(line)
        log.debug("sim loop: %s", line)

    def advance_to(self, t: float) -> None:
        """Run everything due up to simulated time `t`, then stop there."""
        done: asyncio.Future[None] = self.create_future()

        def arrive() -> None:
            if not done.done():
                done.set_result(None)

        self.call_at(t, arrive)
        self.run_until_complete(done)
