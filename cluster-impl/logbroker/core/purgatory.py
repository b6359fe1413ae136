"""Requests that wait: acks=all produces until HW covers them, fetches until data or max wait.

Like Kafka's purgatory, but sans-IO: the core calls `check()` after anything that may complete a
waiter (a role change, an admin task) and `expire(now)` from the server's timer tick. The hot
paths — an append, an HW move — call `check(keys)` with the partitions they touched, which looks
only at waiters watching those partitions (`Deferred.keys`): a follower's long-poll over 160
partitions is not re-examined for every produce to a partition it does not fetch.
A waiter's `complete(timed_out)` builds the response body; `on_done` hands it to the transport.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
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
    keys: frozenset[Hashable] = frozenset()  # partitions whose changes may complete it
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
        self.by_key: dict[Hashable, list[Deferred]] = {}

    def add(self, d: Deferred) -> Deferred:
        if d.ready():
            d.finish(False)
        else:
            self.waiting.append(d)
            for k in d.keys:
                self.by_key.setdefault(k, []).append(d)
        return d

    def check(self, keys: Iterable[Hashable] | None = None) -> None:
        """Complete the waiters that are ready: all of them, or those watching one of `keys`."""
        if keys is None:
            for d in self.waiting:
                if not d.done and d.ready():
                    d.finish(False)
            self._sweep()
            return
        for k in keys:
            ds = self.by_key.get(k)
            if not ds:
                continue
            for d in list(ds):
                if not d.done and d.ready():
                    d.finish(False)
            # a completion may itself have added or checked waiters of this key (a coordinator's write
            # answered, whose follow-up write waits on the same partition): filter what is there now
            cur = self.by_key.get(k)
            if cur is None:
                continue
            live = [d for d in cur if not d.done]
            if live:
                self.by_key[k] = live
            else:
                del self.by_key[k]

    def expire(self, now_ms: int) -> None:
        for d in self.waiting:
            if not d.done and now_ms >= d.deadline_ms:
                d.finish(True)
        self._sweep()

    def _sweep(self) -> None:
        if any(d.done for d in self.waiting):
            self.waiting = [d for d in self.waiting if not d.done]
            for k in [k for k, ds in self.by_key.items() if any(d.done for d in ds)]:
                live = [d for d in self.by_key[k] if not d.done]
                if live:
                    self.by_key[k] = live
                else:
                    del self.by_key[k]

    def has_waiting(self, key: Hashable) -> bool:
        """Whether a request still waits on `key` (a partition: an acks=all produce or a coordinator write)."""
        return any(not d.done for d in self.by_key.get(key, ()))

    def __len__(self) -> int:
        return len(self.waiting)
