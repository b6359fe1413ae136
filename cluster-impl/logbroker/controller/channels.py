"""`BrokerChannels`: the controller's outgoing requests, one ordered queue per broker.

Like Kafka's ControllerChannelManager, and for the same reason: the controller decides under its
lock, but must never wait there for a broker to answer. A paused (SIGSTOP) or partitioned broker
would otherwise hold every other decision — failover included — for as long as its requests take
to time out. Each broker gets its own sender task, so requests to one broker stay in order (a
LeaderAndIsr before the UpdateMetadata that follows it) while a slow broker delays only itself.
Requests to a broker that has left the live set are dropped; it is told everything afresh when it
registers again (a `full` LeaderAndIsr).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)

Send = Callable[[int, dict[str, Any]], Awaitable[dict[str, Any] | None]]
Reply = dict[str, Any] | None
Item = tuple[dict[str, Any], "asyncio.Future[Reply]"]


class BrokerChannels:
    def __init__(self, send: Send) -> None:
        self._send = send
        self._queues: dict[int, asyncio.Queue[Item]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    def enqueue(self, bid: int, body: dict[str, Any]) -> asyncio.Future[Reply]:
        """Queue `body` for broker `bid`; the future gets its reply (None if it never arrived)."""
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        q = self._queues.get(bid)
        if q is None:
            q = self._queues[bid] = asyncio.Queue()
            self._senders[bid] = asyncio.ensure_future(self._run(bid, q))
        q.put_nowait((body, fut))
        return fut

    async def _run(self, bid: int, q: asyncio.Queue[Item]) -> None:
        while True:
            body, fut = await q.get()
            try:
                reply = await self._send(bid, body)
            except asyncio.CancelledError:
                if not fut.done():
                    fut.set_result(None)
                raise
            except Exception as e:  # a failed send is a lost message, never a dead channel
                log.info("controller request %s to broker %d failed: %r", body.get("type"), bid, e)
                reply = None
            if not fut.done():
                fut.set_result(reply)

    def keep_only(self, live: Iterable[int]) -> None:
        """Drop the queues of brokers that are no longer live (their requests are moot)."""
        alive = set(live)
        for bid in [b for b in self._queues if b not in alive]:
            self._close(bid)

    def close(self) -> None:
        for bid in list(self._queues):
            self._close(bid)

    def _close(self, bid: int) -> None:
        task = self._senders.pop(bid, None)
        if task is not None:
            task.cancel()
        q = self._queues.pop(bid)
        while not q.empty():
            _, fut = q.get_nowait()
            if not fut.done():
                fut.set_result(None)

    def pending(self, bid: int) -> int:
        q = self._queues.get(bid)
        return q.qsize() if q is not None else 0
