"""Asyncio clients from one broker to another: internal control requests and follower Fetch.

One connection per (peer, purpose), reopened on failure; every call has a timeout, and a failure
is an exception the caller turns into a retry, never a hang.

A call that is cancelled while its request is on the wire (a follower whose fetcher is stopped
mid long-poll) closes the connection: its response would otherwise arrive later and be read as
the answer to the *next* request on that connection. Every response's correlation id is checked
for the same reason, and an answer that does not decode is a connection error, not a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import struct
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse

from logbroker.net import TCP, Network, Reader, Writer
from logbroker.protocol import internal
from logbroker.protocol.apis import make_message

FETCH_VERSION = 11


class PeerConnection:
    def __init__(self, host: str, port: int, net: Network = TCP) -> None:
        self.host, self.port = host, port
        self.net = net
        self._rw: tuple[Reader, Writer] | None = None
        self._lock = asyncio.Lock()
        self._corr = itertools.count(1)

    async def _conn(self, timeout: float) -> tuple[Reader, Writer]:
        if self._rw is None:
            self._rw = await asyncio.wait_for(self.net.connect(self.host, self.port), timeout)
        return self._rw

    def close(self) -> None:
        """Abandon the connection with a reset: what the kernel still holds of a request we gave up on
        is discarded, never delivered. A graceful close keeps retransmitting it, and a broker cut off
        for 14 s received a controller request the kernel had kept since the cut, seconds after the
        newer ones (see the controller's `_tell` for what the broker also refuses)."""
        if self._rw is not None:
            w = self._rw[1]
            sock = w.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.close()
            self._rw = None

    async def _roundtrip(self, data: bytes, timeout: float) -> bytes:
        async with self._lock:
            try:
                r, w = await self._conn(timeout)
                w.write(data)
                await w.drain()
                size = struct.unpack(">i", await asyncio.wait_for(r.readexactly(4), timeout))[0]
                return await asyncio.wait_for(r.readexactly(size), timeout)
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
                self.close()
                raise ConnectionError(f"{self.host}:{self.port}: {e!r}") from None
            except asyncio.CancelledError:
                self.close()  # the response is still coming: nobody may read it as theirs
                raise

    async def call(self, body: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
        corr = next(self._corr)
        frame = await self._roundtrip(internal.encode_request(corr, body), timeout)
        try:
            got, reply = internal.decode_response(frame)
        except (ValueError, struct.error) as e:
            self.close()
            raise ConnectionError(f"{self.host}:{self.port}: undecodable response: {e!r}") from None
        if got != corr:
            self.close()
            raise ConnectionError(f"{self.host}:{self.port}: correlation id {got} != {corr}")
        return reply

    async def fetch(self, body: dict[str, Any], timeout: float) -> Any:
        """One Fetch request (a dict of FetchRequest fields); the decoded FetchResponse."""
        return await self.request(FetchRequest, FetchResponse, FETCH_VERSION, body, timeout)

    async def request(self, request_cls: Any, response_cls: Any, version: int, body: dict[str, Any],
                      timeout: float) -> Any:
        """One Kafka request (a dict of the request class's fields) at `version`; the decoded response."""
        corr = next(self._corr)
        req = make_message(request_cls, version, body)
        req.with_header(correlation_id=corr, client_id="logbroker-replica")
        frame = await self._roundtrip(bytes(req.encode(header=True, framed=True)), timeout)
        (got,) = struct.unpack_from(">i", frame, 0) if len(frame) >= 4 else (None,)
        if got != corr:
            self.close()
            raise ConnectionError(f"{self.host}:{self.port}: correlation id {got} != {corr}")
        try:
            return response_cls.decode(frame, version=version, header=True)
        except Exception as e:  # the codec raises assorted types on garbage
            self.close()
            raise ConnectionError(f"{self.host}:{self.port}: undecodable response: {e!r}") from None


class Peers:
    """Connections to other brokers, by broker id, for one purpose (control or fetch)."""

    def __init__(self, net: Network = TCP) -> None:
        self.net = net
        self.endpoints: dict[int, tuple[str, int]] = {}
        self._conns: dict[int, PeerConnection] = {}

    def set_endpoint(self, bid: int, host: str, port: int) -> None:
        if self.endpoints.get(bid) != (host, port):
            self.endpoints[bid] = (host, port)
            old = self._conns.pop(bid, None)
            if old is not None:
                old.close()

    def get(self, bid: int) -> PeerConnection:
        if bid not in self._conns:
            host, port = self.endpoints[bid]
            self._conns[bid] = PeerConnection(host, port, self.net)
        return self._conns[bid]

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()
