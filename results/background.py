"""Work beside the check's main thread (Spark jobs side by side, elle-cli, the plots) in daemon threads.

Why not `concurrent.futures`: its worker threads are joined when the interpreter exits, so a Ctrl-C
during the check would wait for every job still running (minutes on a large history, and a job on
the shared check server does not even see the signal). A daemon thread is left behind instead:
the stop signal ends the command at once, the caller's `on_interrupt` asks Spark to cancel what it
started, and what the thread held (an in-process JVM, an elle-cli child) ends with the process.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class Task(Generic[T]):
    """`f()` running in a daemon thread of its own from construction on; `result()` waits for it."""

    def __init__(self, f: Callable[[], T], name: str) -> None:
        self._f = f
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._f()
        except BaseException as e:  # handed to whoever waits; a thread has no one else to tell
            self._error = e

    def wait(self) -> BaseException | None:
        """Wait for the end; the error it raised, or None."""
        self._thread.join()
        return self._error

    def ended_within(self, seconds: float) -> bool:
        """Wait at most `seconds`; whether it ended (a task that did not goes on, abandoned)."""
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def result(self) -> T:
        if (e := self.wait()) is not None:
            raise e
        return self._value  # type: ignore[return-value]  # None only where f returned None


def run_all(tasks: Sequence[Callable[[], T]], name: str,
            on_interrupt: Callable[[], None] | None = None) -> list[T]:
    """Run `tasks` at once, each in its own thread; their results in order. Every task is waited for
    before an error is raised (no job is left running behind the caller's back), and an error says
    the same on every run: the first in task order, except that an `EnvironmentProblem` (why nothing
    could run: a dead JVM, a server gone) wins over the errors it caused. A stop signal while waiting
    calls `on_interrupt` (cancel the jobs) and is raised at once."""
    from kernel.errors import EnvironmentProblem

    started = [Task(t, f"{name}-{i}") for i, t in enumerate(tasks)]
    try:
        errors = [t.wait() for t in started]
    except BaseException:
        if on_interrupt is not None:
            with contextlib.suppress(Exception):  # best effort on the way out: the interrupt is what matters
                on_interrupt()
        raise
    for e in errors:
        if e is not None:
            raise next((x for x in errors if isinstance(x, EnvironmentProblem)), e)
    return [t.result() for t in started]
