"""The asyncio adapter around `BrokerCore`: sockets, framing, ordering, timers, shutdown.

Each connection handles one request at a time, in order (as Kafka does by muting a channel until
its response is sent), so a waiting acks=all produce holds back only its own connection. A frame
that is oversized, truncated or undecodable closes that connection and is logged; it never
reaches the rest of the broker (an undecodable ApiVersions is answered INVALID_REQUEST, as Kafka
does, so a client learns why).

Memory: a request's bytes are read as they arrive (a half-sent 100 MB frame holds only what was
sent), and every frame reserves its size in a broker-wide budget (`queued.max.request.bytes`)
before its body is read, released when its response is written; while the budget is spent, new
frames wait unread (Kafka's memory pool). A connection with no bytes in for
`connections.max.idle.ms` and no request being served is closed, half-sent frame and all.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from logbroker.core.broker import BrokerCore, Reply
from logbroker.net import TCP, Listener, Network
from logbroker.protocol import internal
from logbroker.protocol.apis import (
    API_VERSIONS_KEY,
    APIS,
    api_versions_body,
    decode_request,
    encode_response,
    peek_head,
)
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)
#: at DEBUG (`--wire-trace`): one line per client request of the APIs that route a consumer
#: (Metadata, ListOffsets, OffsetForLeaderEpoch, FindCoordinator, OffsetFetch/Commit) and each Fetch
#: partition answered with an error, with the leader and epoch each answer names
wire = logging.getLogger("logbroker.wire")

TICK_S = 0.01
CHUNK = 1 << 16


class RequestMemory:
    """Bytes of requests being read or served, broker-wide. A frame larger than what is left waits
    until others finish; one frame always fits into an empty budget."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self._freed = asyncio.Event()

    async def acquire(self, n: int) -> None:
        while self.used and self.used + n > self.limit:
            self._freed.clear()
            await self._freed.wait()
        self.used += n

    def release(self, n: int) -> None:
        self.used -= n
        self._freed.set()


class ProtocolViolation(Exception):
    """The peer sent something we will not parse; close its connection."""


class NoViewYet(Exception):
    """A Metadata request waited out `FIRST_VIEW_WAIT_MS` without this broker hearing from the
    controller: close the connection rather than answer with nothing, so the client asks another
    broker (`BrokerCore._metadata_awaiting_first_view` says why)."""



class BrokerServer:
    def __init__(self, core: BrokerCore, net: Network = TCP) -> None:
        """`net`: real sockets by default; the simulator hands in its model network."""
        self.core = core
        self.net = net
        self.server: Listener | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.connections: set[Any] = set()
        self.handlers: set[asyncio.Task[Any]] = set()
        self.memory = RequestMemory(core.config.queued_max_request_bytes)
        self.last_active: dict[Any, float] = {}  # connections not serving a request
        self._next_sweep = 0.0

    async def start(self) -> None:
        cfg = self.core.config
        self.server = await self.net.listen(self._serve, cfg.host, cfg.port)
        self._ticker = asyncio.create_task(self._tick())
        log.info("broker %d listening on %s:%d", cfg.broker_id, cfg.host, cfg.port)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.core.tick()
                self._close_idle()
            except Exception:  # a timer bug must not stop the timers
                log.exception("tick failed")

    def _close_idle(self) -> None:
        now = asyncio.get_running_loop().time()
        if now < self._next_sweep:
            return
        self._next_sweep = now + 1.0
        idle = self.core.config.connections_max_idle_ms / 1000
        for w, t in list(self.last_active.items()):
            if now - t > idle:
                log.info("closing connection from %s: idle for %.0f s", w.get_extra_info("peername"), now - t)
                self.last_active.pop(w, None)
                w.close()

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

    async def _serve(self, reader: Any, writer: Any) -> None:
        peer = writer.get_extra_info("peername")
        self.connections.add(writer)
        me = asyncio.current_task()
        if me is not None:
            self.handlers.add(me)
            me.add_done_callback(self.handlers.discard)
        loop = asyncio.get_running_loop()
        try:
            while True:
                self.last_active[writer] = loop.time()
                try:
                    size_b = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = struct.unpack(">i", size_b)
                if size <= 0 or size > self.core.config.socket_request_max_bytes:
                    raise ProtocolViolation(f"frame size {size} out of bounds")
                self.last_active[writer] = loop.time()
                await self.memory.acquire(size)
                try:
                    frame = await self._read_frame(reader, writer, size)
                    self.last_active.pop(writer, None)  # serving: never idle
                    out = await self._respond(frame, peer)
                    if out is not None:
                        writer.write(out)
                        await writer.drain()
                finally:
                    self.memory.release(size)
        except ProtocolViolation as e:
            log.warning("closing connection from %s: %s", peer, e)
        except NoViewYet:
            log.info("closing connection from %s: asked for Metadata before this broker had a view of the cluster",
                     peer)
        except ConnectionError:
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self.connections.discard(writer)
            self.last_active.pop(writer, None)
            writer.close()

    async def _read_frame(self, reader: Any, writer: Any, size: int) -> bytes:
        """The frame's bytes as they arrive; each chunk counts as activity for the idle timer."""
        try:
            if size <= CHUNK:
                return await reader.readexactly(size)
            buf = bytearray()
            loop = asyncio.get_running_loop()
            while len(buf) < size:
                buf += await reader.readexactly(min(CHUNK, size - len(buf)))
                if writer in self.last_active:
                    self.last_active[writer] = loop.time()
            return bytes(buf)
        except asyncio.IncompleteReadError:
            raise ProtocolViolation("connection closed mid-frame") from None

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

    async def _respond(self, frame: bytes, peer: Any = None) -> bytes | None:
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
            if head.api_key == API_VERSIONS_KEY:  # KIP-511: tell the client, at v0, which it can always read
                log.warning("undecodable ApiVersions v%d: %r; answering INVALID_REQUEST", head.api_version, e)
                return encode_response(api, 0, head.correlation_id, api_versions_body(int(Err.INVALID_REQUEST)))
            raise ProtocolViolation(f"undecodable {api.name} v{head.api_version}: {e!r}") from None
        host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""  # Kafka's form, "/127.0.0.1"
        answered = await self.answer(head.api_key, head.api_version, request, host)
        if answered is None:
            return None
        version, body = answered
        if api.name == "Metadata" and not body.get("brokers"):  # only an answer without a view names none
            raise NoViewYet
        return encode_response(api, version, head.correlation_id, body)

    async def answer(self, api_key: int, version: int, request: Any, client_host: str = "") -> tuple[int, Any] | None:
        """A decoded request's (response version, body), once it is complete (a produce waiting for
        its ISR, a fetch's long-poll); None when nothing is answered (acks=0). The socket path above
        decodes and encodes around it; the simulator's client calls it with decoded requests."""
        reply: Reply = self.core.handle(api_key, version, request, client_host=client_host)
        if reply.deferred is not None:
            fut: asyncio.Future[tuple[int, Any]] = asyncio.get_running_loop().create_future()

            def done(version: int, body: Any) -> None:
                if not fut.done():
                    fut.set_result((version, body))

            reply.deferred.on_done(done)
            if reply.deferred.done:  # completed before we attached
                fut.set_result((reply.deferred.version, reply.deferred.complete(False)))
            got = await fut
            if wire.isEnabledFor(logging.DEBUG):
                trace_wire(self.core.config.broker_id, api_key, version, request, got[1])
            return got
        if reply.body is None:
            return None
        if wire.isEnabledFor(logging.DEBUG):
            trace_wire(self.core.config.broker_id, api_key, version, request, reply.body)
        return reply.version, reply.body


_TRACED = {1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
           10: "FindCoordinator", 23: "OffsetForLeaderEpoch"}


def _plain(x: Any, depth: int = 0) -> Any:
    """A decoded request or a response body as plain values, record bytes left out."""
    if depth > 6:
        return "..."
    if isinstance(x, dict):
        return {k: _plain(v, depth + 1) for k, v in x.items() if k != "records"}
    if isinstance(x, (list, tuple)):
        return [_plain(v, depth + 1) for v in x]
    if isinstance(x, (bytes, bytearray, memoryview)):
        return f"<{len(x)} bytes>"
    if hasattr(x, "__dict__") and not isinstance(x, type):
        return {k: _plain(v, depth + 1) for k, v in vars(x).items() if not k.startswith("_") and k != "records"}
    return x


def trace_wire(broker_id: int, api_key: int, version: int, request: Any, body: Any) -> None:
    """One DEBUG line of `logbroker.wire` for a traced API's request and answer. Fetch is traced only
    when a partition's answer carries an error (its successful answers are the bulk of the traffic)."""
    name = _TRACED.get(api_key)
    if name is None or getattr(request, "replica_id", -1) >= 0:
        return
    answer = _plain(body)
    if api_key == 1:
        bad = [(t.get("topic"), p.get("partition_index"), p.get("error_code")) for t in answer.get("responses", [])
               for p in t.get("partitions", []) if p.get("error_code")]
        if not bad:
            return
        wire.debug("broker %d %s v%d %s", broker_id, name, version, bad)
        return
    wire.debug("broker %d %s v%d request %s answer %s", broker_id, name, version, _plain(request), answer)
