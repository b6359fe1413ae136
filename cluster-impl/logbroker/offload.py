"""`Offload`: how cluster logic runs a blocking call (a ZooKeeper request, an fsync'd checkpoint).

The controller and the replica manager never start threads themselves: the process entry hands
them an `Offload`. A real broker passes `in_worker_thread` (kazoo and fsync block; the event loop
must not); a deterministic simulator passes `inline`, so every call runs on its one seeded loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol


class Offload(Protocol):
    async def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` and return its result (or raise its exception)."""
        ...


async def in_worker_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """The default executor's worker threads: for blocking I/O in a real broker."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def inline(fn: Callable[..., Any], *args: Any) -> Any:
    """On the calling task, at once: for in-memory stores and simulated storage."""
    return fn(*args)
