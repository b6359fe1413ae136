"""Run a ZooKeeper-reading step again until it succeeds: the fix for one-shot watches.

A ZooKeeper watch fires once and is re-armed only by the read that follows; when that read fails
(a connection loss, an expired session) there is no watch any more, and whoever relied on it never
hears of that kind of change again. Steps that re-read everything are safe to run again, so they
retry with a capped exponential backoff until they succeed or `gone()` says nobody needs them.
`asyncio.sleep` keeps it on the loop's clock (virtual under the simulator).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


async def until_done(step: Callable[[], Awaitable[None]], gone: Callable[[], bool], what: str,
                     first_delay_s: float = 0.2, max_delay_s: float = 3.0) -> None:
    delay = first_delay_s
    while not gone():
        try:
            await step()
            return
        except Exception as e:
            if gone():
                return
            log.warning("%s failed (%s: %s); again in %.1f s", what, type(e).__name__, e, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay_s)
