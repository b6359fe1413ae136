"""Requests that wait: acks=all produces until HW covers them, fetches until data or max wait.

Like Kafka's purgatory, but sans-IO: the core calls `check()` after anything that may complete a
waiter (an append, an HW move, a role change) and `expire(now)` from the server's timer tick.
A waiter's `complete(timed_out)` builds the response body; `on_done` hands it to the transport.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Body = dict[str, Any]


@dataclass
class Deferred:
    """A response that is not ready yet."""

    ready: Callable[[], bool]
    complete: Callable[[bool], Body]  # argument: timed out?
    deadline_ms: int
    version: int
    done: bool = False
    _callbacks: list[Callable[[int, Body], None]] = field(default_factory=list)

    def on_done(self, cb: Callable[[int, Body], None]) -> None:
        self._callbacks.append(cb)

    def finish(self, timed_out: bool) -> None:
        if self.done:
            return
        self.done = True
        body = self.complete(timed_out)
        for cb in self._callbacks:
            cb(self.version, body)


class Purgatory:
    def __init__(self) -> None:
        self.waiting: list[Deferred] = []

    def add(self, d: Deferred) -> Deferred:
        if d.ready():
            d.finish(False)
        else:
            self.waiting.append(d)
        return d

    def check(self) -> None:
        still = []
        for d in self.waiting:
            if d.ready():
                d.finish(False)
            elif not d.done:
                still.append(d)
        self.waiting = still

    def expire(self, now_ms: int) -> None:
        still = []
        for d in self.waiting:
            if d.done:
                continue
            if now_ms >= d.deadline_ms:
                d.finish(True)
            else:
                still.append(d)
        self.waiting = still

    def __len__(self) -> int:
        return len(self.waiting)
