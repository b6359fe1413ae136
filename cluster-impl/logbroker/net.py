"""`Network`: how the broker listens and how it opens connections to its peers.

The server, the peers' channels and the replica fetchers never call `asyncio.start_server` or
`asyncio.open_connection` themselves: they are handed a `Network`. A real broker uses `TCP` (asyncio
streams on real sockets); the deterministic simulator (`logsim`) hands in a model network whose
streams carry the same bytes with seeded delays, drops and partitions (docs/design.md, "The simulator and its seams").

A stream is the small part of asyncio's `StreamReader`/`StreamWriter` the broker uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol


class Reader(Protocol):
    async def readexactly(self, n: int) -> bytes:
        """Exactly `n` bytes; `asyncio.IncompleteReadError` when the peer closed first."""
        ...


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """"peername" is the peer's (host, port) tuple."""
        ...


Handler = Callable[[Any, Any], Coroutine[Any, Any, None]]


class Listener(Protocol):
    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class Network(Protocol):
    async def listen(self, handler: Handler, host: str, port: int) -> Listener:
        """Accept connections on (host, port); `handler(reader, writer)` serves each one."""
        ...

    async def connect(self, host: str, port: int) -> tuple[Reader, Writer]:
        """Open a connection; `OSError` (or `ConnectionError`) when nobody answers."""
        ...


class TcpNetwork:
    """Real sockets, through asyncio streams."""

    async def listen(self, handler: Handler, host: str, port: int) -> Listener:
        return await asyncio.start_server(handler, host, port, reuse_address=True)

    async def connect(self, host: str, port: int) -> tuple[Reader, Writer]:
        return await asyncio.open_connection(host, port)


TCP: Network = TcpNetwork()
