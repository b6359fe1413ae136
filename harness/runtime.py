"""`ThreadRuntime`: the container backend's `kernel.runtime.Runtime` — the wall clock and one thread
per activity, each running its coroutine on a private event loop.

A coroutine written for the runtime awaits only sleeps and its own helpers; the blocking calls it
makes (SSH commands, librdkafka) block its own thread and nothing else, as the thread-per-worker
pool and thread-per-fault nemesis did before the simulator shared their code. `cancel()` reaches
into the activity's loop from any thread (`call_soon_threadsafe`), so a heal stops a composition at
its next await exactly as the simulator's task cancellation does.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class ThreadActivity:
    def __init__(self, name: str, coro: Coroutine[Any, Any, Any]) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self.thread = threading.Thread(target=self._main, args=(coro,), name=name, daemon=True)
        self.thread.start()

    def _main(self, coro: Coroutine[Any, Any, Any]) -> None:
        loop = asyncio.new_event_loop()
        try:
            with self._lock:
                task = loop.create_task(coro)
                self._loop, self._task = loop, task
                if self._cancelled:
                    task.cancel()
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass
        except BaseException:  # the coroutines report their own errors; this is a last resort
            log.exception("activity %s failed", self.name)
        finally:
            with self._lock:
                self._loop = None
            loop.close()

    def done(self) -> bool:
        return not self.thread.is_alive()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._loop is not None and self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)


class ThreadRuntime:
    """Real time, real threads (see the module docstring)."""

    def now(self) -> float:
        return time.monotonic()

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> ThreadActivity:
        return ThreadActivity(name, coro)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = asyncio.new_event_loop()  # not asyncio.run: it would take over SIGINT from `stop_signals`
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.close()

    def pass_time(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def facts(self) -> dict[str, Any]:
        return {}

    def join(self, activities: list[Any], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for a in activities:
            a.thread.join(max(0.0, deadline - time.monotonic()))
