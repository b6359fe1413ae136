"""The asyncio adapter around `BrokerCore`: sockets, framing, ordering, timers, shutdown.

Each connection handles one request at a time, in order (as Kafka does by muting a channel until
its response is sent), so a waiting acks=all produce holds back only its own connection. A frame
that is oversized, truncated or undecodable closes that connection and is logged; it never
reaches the rest of the broker.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from logbroker.core.broker import BrokerCore, Reply
from logbroker.protocol import internal
from logbroker.protocol.apis import (
    API_VERSIONS_KEY,
    APIS,
    api_versions_body,
    decode_request,
    encode_response,
    peek_head,
)

log = logging.getLogger(__name__)

TICK_S = 0.01


class ProtocolViolation(Exception):
    """The peer sent something we will not parse; close its connection."""


class BrokerServer:
    def __init__(self, core: BrokerCore) -> None:
        self.core = core
        self.server: asyncio.base_events.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.connections: set[asyncio.StreamWriter] = set()
        self.handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        cfg = self.core.config
        self.server = await asyncio.start_server(self._serve, cfg.host, cfg.port, reuse_address=True)
        self._ticker = asyncio.create_task(self._tick())
        log.info("broker %d listening on %s:%d", cfg.broker_id, cfg.host, cfg.port)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.core.tick()
            except Exception:  # a timer bug must not stop the timers
                log.exception("tick failed")

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for w in list(self.connections):
            w.close()
        if self.handlers:  # let each handler see its closed connection and return, rather than be
            # cancelled by asyncio.run's cleanup (which Python 3.11 logs as an error per connection)
            await asyncio.wait(list(self.handlers), timeout=2)
        if self._ticker is not None:
            self._ticker.cancel()
        if self.server is not None:
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        self.connections.add(writer)
        me = asyncio.current_task()
        if me is not None:
            self.handlers.add(me)
            me.add_done_callback(self.handlers.discard)
        try:
            while True:
                try:
                    size_b = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = struct.unpack(">i", size_b)
                if size <= 0 or size > self.core.config.socket_request_max_bytes:
                    raise ProtocolViolation(f"frame size {size} out of bounds")
                try:
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    raise ProtocolViolation("connection closed mid-frame") from None
                out = await self._respond(frame)
                if out is not None:
                    writer.write(out)
                    await writer.drain()
        except ProtocolViolation as e:
            log.warning("closing connection from %s: %s", peer, e)
        except ConnectionError:
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self.connections.discard(writer)
            writer.close()

    async def _respond_internal(self, correlation_id: int, frame: bytes) -> bytes:
        handler = getattr(self.core.replication, "handle_internal", None)
        if handler is None:
            raise ProtocolViolation("inter-broker request to a standalone broker")
        try:
            body = internal.decode_request(frame)
        except ValueError as e:
            raise ProtocolViolation(f"undecodable internal request: {e}") from None
        reply = await handler(body)
        return internal.encode_response(correlation_id, reply)

    async def _respond(self, frame: bytes) -> bytes | None:
        try:
            head = peek_head(frame)
        except ValueError as e:
            raise ProtocolViolation(str(e)) from None
        if head.api_key == internal.INTERNAL_KEY:
            return await self._respond_internal(head.correlation_id, frame)
        api = APIS.get(head.api_key)
        if api is None:
            raise ProtocolViolation(f"unsupported api key {head.api_key}")
        if not api.min_version <= head.api_version <= api.max_version:
            if head.api_key == API_VERSIONS_KEY:
                # the protocol's rule: answer with a v0 response carrying UNSUPPORTED_VERSION and our
                # ranges, so the client retries with a version we speak
                return encode_response(api, 0, head.correlation_id, api_versions_body(35))
            raise ProtocolViolation(f"unsupported version {head.api_version} of {api.name}")
        try:
            request = decode_request(api, head.api_version, frame)
        except Exception as e:
            raise ProtocolViolation(f"undecodable {api.name} v{head.api_version}: {e!r}") from None
        reply: Reply = self.core.handle(head.api_key, head.api_version, request)
        if reply.deferred is not None:
            fut: asyncio.Future[tuple[int, Any]] = asyncio.get_running_loop().create_future()

            def done(version: int, body: Any) -> None:
                if not fut.done():
                    fut.set_result((version, body))

            reply.deferred.on_done(done)
            if reply.deferred.done:  # completed before we attached
                fut.set_result((reply.deferred.version, reply.deferred.complete(False)))
            version, body = await fut
            return encode_response(api, version, head.correlation_id, body)
        if reply.body is None:
            return None
        return encode_response(api, reply.version, head.correlation_id, reply.body)
