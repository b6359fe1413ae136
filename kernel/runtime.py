"""`Runtime`: how a run's time passes and how its activities run side by side — the seam between the
container backend (threads on the wall clock) and the simulator (one seeded loop on virtual time).

Everything that waits during a run is written once, as a coroutine: a worker's loop, the final
drain, a fault's life, a composition's steps (`await asyncio.sleep(...)`, `await wait_for(...)`).
The awaits are the effects; who carries them out is the runtime's business:
- in containers (`harness.runtime.ThreadRuntime`) each activity is a thread running its coroutine on
  a private event loop, so the blocking calls inside it (SSH, librdkafka) block only that thread;
- in the simulator every activity is a task on the simulator's loop, and time moves only while the
  orchestrator lets it (`pass_time`, `join`, `run`), so a seed gives one history.
Inside an activity `asyncio.sleep` and `asyncio.get_running_loop().time()` are the runtime's time on
both backends; outside, the orchestrator asks `now()`. Cancelling an activity raises
`CancelledError` at its current await, on both (a blocking call under way finishes first).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Activity(Protocol):
    """One coroutine running under a runtime."""

    name: str

    def done(self) -> bool:
        """True once the coroutine has returned, raised or been cancelled."""
        ...

    def cancel(self) -> None:
        """Stop it at its current (or next) await; idempotent."""
        ...


class Runtime(Protocol):
    """Time and concurrency for one run (see the module docstring)."""

    def now(self) -> float:
        """Seconds on the runtime's monotonic clock (the same clock activities see as `loop.time()`)."""
        ...

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> Activity:
        """Start `coro` as an activity of its own; callable from the orchestrator and from activities."""
        ...

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` to its end from the orchestrator (the spawned activities go on meanwhile)."""
        ...

    def pass_time(self, seconds: float) -> None:
        """The orchestrator waits `seconds` while the activities go on."""
        ...

    def join(self, activities: list[Activity], timeout_s: float) -> None:
        """Wait until every one of `activities` is done, or `timeout_s` has passed."""
        ...

    def facts(self) -> dict[str, Any]:
        """What test.json should record about the run's time (simulated seconds, the loop's errors)."""
        ...
