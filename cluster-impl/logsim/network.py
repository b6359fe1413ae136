"""`SimNetwork`: the network model — per-link seeded delay, drops and partitions as grudges.

Model:
- Hosts are node names plus `control` (where the clients and the harness live, as in Jepsen: a
  partition never cuts the control host off, only nodes from each other).
- A connection is two ordered byte pipes (TCP keeps order within a connection). Each write is one
  packet, delivered after the link's delay: a seeded base per link plus a seeded exponential tail,
  never before the previous packet of the same pipe. Packets of different connections reorder.
- A grudge says which host drops what from which (`dst` drops packets from `src`), as the iptables
  nemesis does; grudges stack (overlapping faults) and lift one by one. A grudge may be scoped as
  the compositions' port rules are: `to-port` drops only what `src` sends to `dst`'s listening port
  (requests on connections `src` opened: a `cut`), `from-port` only what `src` answers from its
  own listening port (replies on connections `dst` opened: a `mute`); the other connections
  between the two flow. ZooKeeper traffic is not in this model (`zookeeper.py`), so a whole-host
  grudge is what a broker-port rule is in the containers. TCP retransmits what was
  dropped: a pipe whose packet was dropped holds it and everything after it, in order, and sends
  them when the grudge lifts — a request can arrive long after its sender gave up on it (the stale
  orders of a zombie controller). A `flaky` grudge drops a seeded share of packets; each costs a
  retransmission timeout (0.2-1 s) of delay. Connecting across a grudge hangs (the SYN is
  dropped) until the caller's timeout.
- A connection to a port nobody listens on (a killed broker) is refused after one delay. When a
  node's process dies its kernel closes its connections (what they still hold is sent first):
  peers read end-of-stream. A power loss takes the kernel too: what its pipes held is gone.
- Deliveries to a node belong to that node's incarnation: held while it is paused, dropped once it
  is dead (`loop.py`).

`HostNetwork` is one host's view, the `logbroker.net.Network` a broker is handed. Besides byte
streams the model carries *decoded* requests (`request`): the simulated client's calls to a
broker's `answer`, with the same delays, partitions, pauses and deaths, but no encoding.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from logsim.loop import NODE, Incarnation, SimLoop
from logsim.rng import Streams
from logsim.rng import streams as rng_streams

CONTROL = "control"
HOLD_RETRY_S = 0.2  # a held request arrives this long after its grudge lifts (a retransmission)
BASE_DELAY_S = (0.0002, 0.001)  # a link's fixed part, seeded per link
TAIL_S = 0.0005  # mean of the exponential part


class Pipe:
    """One direction of a connection: packets in order, to a reader on the far side."""

    def __init__(self, net: SimNetwork, src: str, dst: str, to_server: bool) -> None:
        self.net, self.src, self.dst = net, src, dst
        self.buf = bytearray()
        self.eof = False
        self.held: list[bytes | None] = []  # dropped by a grudge: retransmitted once it lifts
        self.last_at = 0.0
        self.waiter: asyncio.Future[None] | None = None
        self.dst_inc: Incarnation | None = None  # the receiving incarnation (None: control host)
        self.scope = "to-port" if to_server else "from-port"  # which port rules apply to this pipe

    def blocked(self) -> bool:
        """A "hold" grudge stops a connection's requests as a `to-port` one does: held in the pipe and
        retransmitted on the lift is what a pipe does with any drop (an iptables DROP on the port
        stops every connection to it, the replica fetcher's as much as a request's)."""
        net = self.net
        return (net.blocked(self.src, self.dst) or net.port_blocked(self.src, self.dst, self.scope)
                or (self.scope == "to-port" and net.port_blocked(self.src, self.dst, "hold")))

    def send(self, data: bytes | None) -> None:
        """Queue `data` (None: end of stream) for delivery."""
        if self.held or self.blocked():
            self.held.append(data)
            self.net.stalled.append(self)
            return
        # strictly after the previous packet (the loop's tie-breaking jitter must not reorder a pipe)
        at = max(self.net.loop.time() + self.net.delay(self.src, self.dst), self.last_at + 1e-6)
        if self.net.lost(self.src, self.dst):
            at += self.net.retransmit_delay(self.src, self.dst)
        self.last_at = at
        self.net.loop.call_in(self.dst_inc, at - self.net.loop.time(), self._arrive, data)

    def retransmit(self) -> None:
        """The grudge lifted: send what was held, in order."""
        held, self.held = self.held, []
        for data in held:
            self.send(data)

    def _arrive(self, data: bytes | None) -> None:
        if data is None:
            self.eof = True
        else:
            self.buf += data
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def close_now(self) -> None:
        """The local end goes away: a pending read ends at once."""
        self.eof = True
        self._wake()

    async def readexactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if self.eof:
                partial = bytes(self.buf)
                self.buf.clear()
                raise asyncio.IncompleteReadError(partial, n)
            self.waiter = self.net.loop.create_future()
            await self.waiter
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


class End:
    """One side of a connection: reads from `inbound`, writes to `outbound` (asyncio's reader and
    writer in one object)."""

    def __init__(self, inbound: Pipe, outbound: Pipe, peer: tuple[str, int]) -> None:
        self.inbound, self.outbound, self.peer = inbound, outbound, peer
        self.closed = False

    async def readexactly(self, n: int) -> bytes:
        return await self.inbound.readexactly(n)

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.outbound.send(bytes(data))

    async def drain(self) -> None:
        if self.closed:
            raise ConnectionResetError("connection closed")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.outbound.send(None)
            self.inbound.close_now()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peer if name == "peername" else default


@dataclass
class Listener:
    net: SimNetwork
    host: str
    port: int
    handler: Callable[[Any, Any], Coroutine[Any, Any, None]]
    inc: Incarnation | None
    answer: Callable[..., Awaitable[Any]] | None = None
    ends: list[End] = field(default_factory=list)

    def close(self) -> None:
        if self.net.listeners.get((self.host, self.port)) is self:
            del self.net.listeners[(self.host, self.port)]

    async def wait_closed(self) -> None:
        return None


class SimNetwork:
    def __init__(self, loop: SimLoop, seed: int, streams: Streams | None = None) -> None:
        """`streams`: where each link's delays and losses come from (default: `rng.streams(seed)`)."""
        self.loop = loop
        self.seed = seed
        self.streams = streams or rng_streams(seed)
        self.listeners: dict[tuple[str, int], Listener] = {}
        self.drops: Counter[tuple[str, str]] = Counter()  # (dst, src): dst drops packets from src
        self.flaky: dict[tuple[str, str], list[float]] = {}
        self.port_drops: Counter[tuple[str, str, str]] = Counter()  # (dst, src, scope), scoped grudges
        self.held: list[tuple[str, str, Any, Callable[[], None]]] = []  # requests a "hold" grudge keeps, in order
        self._links: dict[tuple[str, str], tuple[float, random.Random]] = {}
        self._ends: dict[Incarnation, list[End]] = {}
        self._ports = 40000
        self.packets = 0
        self.stalled: list[Pipe] = []

    # --- the links -------------------------------------------------------------------------------
    def _link(self, src: str, dst: str) -> tuple[float, random.Random]:
        got = self._links.get((src, dst))
        if got is None:
            r = self.streams("link", src, dst)
            got = self._links[(src, dst)] = (r.uniform(*BASE_DELAY_S), r)
        return got

    def delay(self, src: str, dst: str) -> float:
        base, r = self._link(src, dst)
        self.packets += 1
        return base + r.expovariate(1 / TAIL_S)

    def blocked(self, src: str, dst: str) -> bool:
        """`dst` drops everything from `src` now."""
        return src != dst and self.drops[(dst, src)] > 0

    def port_blocked(self, src: str, dst: str, scope: str) -> bool:
        """`dst` drops what `src` sends on this side of a connection (`Pipe.scope`) now."""
        return bool(self.port_drops) and self.port_drops[(dst, src, scope)] > 0

    def lost(self, src: str, dst: str) -> bool:
        """A `flaky` grudge drops this packet (it will be retransmitted)."""
        loss = self.flaky.get((dst, src))
        return bool(loss) and self._link(src, dst)[1].random() < max(loss or [0.0])

    def retransmit_delay(self, src: str, dst: str) -> float:
        return self._link(src, dst)[1].uniform(0.2, 1.0)

    def dropped(self, src: str, dst: str) -> bool:
        """A message (not a stream) from `src` to `dst` is lost now."""
        return self.blocked(src, dst) or self.lost(src, dst)

    def _retransmit(self) -> None:
        stalled, self.stalled = self.stalled, []
        for pipe in dict.fromkeys(stalled):
            if pipe.held:
                if pipe.blocked():
                    self.stalled.append(pipe)
                else:
                    pipe.retransmit()

    def reachable(self, a: str, b: str) -> bool:
        """Both directions fully open (a partition in either direction cuts a TCP conversation)."""
        return not (self.drops[(a, b)] or self.drops[(b, a)])

    def add_grudge(self, grudge: dict[str, list[str]], loss: float | None = None, scope: str = "all") -> None:
        """`scope`: "all", or a port rule ("to-port", "from-port"; never with `loss`), or "hold": the
        requests to the destination's broker are held, not lost, and served once the grudge lifts (a
        TCP connection's retransmission, as an iptables DROP does to a connection that stays open;
        Bufstream's delayed produce). Decoded requests (`request`) are held in a list; a connection's
        byte stream is held in its pipe, as a drop always is."""
        for dst, srcs in grudge.items():
            for src in srcs:
                if scope != "all":
                    self.port_drops[(dst, src, scope)] += 1
                elif loss is None:
                    self.drops[(dst, src)] += 1
                else:
                    self.flaky.setdefault((dst, src), []).append(loss)

    def lift_grudge(self, grudge: dict[str, list[str]], loss: float | None = None, scope: str = "all") -> None:
        for dst, srcs in grudge.items():
            for src in srcs:
                if scope != "all":
                    if self.port_drops[(dst, src, scope)] > 0:
                        self.port_drops[(dst, src, scope)] -= 1
                    if not self.port_drops[(dst, src, scope)]:
                        self.port_drops.pop((dst, src, scope), None)
                elif loss is None:
                    if self.drops[(dst, src)] > 0:
                        self.drops[(dst, src)] -= 1
                        if not self.drops[(dst, src)]:
                            del self.drops[(dst, src)]
                else:
                    lst = self.flaky.get((dst, src), [])
                    if loss in lst:
                        lst.remove(loss)
                    if not lst:
                        self.flaky.pop((dst, src), None)
        self._retransmit()
        self._release_held()

    def heal(self) -> None:
        self.drops.clear()
        self.flaky.clear()
        self.port_drops.clear()
        self._retransmit()
        self._release_held()

    def _release_held(self) -> None:
        """Deliver, in the order they were sent, the held requests whose grudge has lifted."""
        still = []
        for i, (src, host, inc, arrive) in enumerate(self.held):
            if self.port_blocked(src, host, "hold"):
                still.append((src, host, inc, arrive))
            else:
                self.loop.call_in(inc, HOLD_RETRY_S + i * 1e-6, arrive)
        self.held = still

    # --- hosts -----------------------------------------------------------------------------------
    def host(self, name: str) -> HostNetwork:
        return HostNetwork(self, name)

    def listen(self, host: str, port: int, handler: Callable[[Any, Any], Coroutine[Any, Any, None]]) -> Listener:
        lst = Listener(self, host, port, handler, NODE.get())
        self.listeners[(host, port)] = lst
        return lst

    async def connect(self, src: str, host: str, port: int) -> tuple[End, End]:
        me = NODE.get()
        await asyncio.sleep(self.delay(src, host))
        lst = self.listeners.get((host, port))
        if lst is None or (lst.inc is not None and lst.inc.dead):
            raise ConnectionRefusedError(f"{host}:{port}: connection refused")
        if (self.blocked(src, host) or self.blocked(host, src) or self.port_blocked(src, host, "to-port")
                or self.port_blocked(src, host, "hold") or self.port_blocked(host, src, "from-port")):
            await self.loop.create_future()  # the SYN is lost: hang until the caller's timeout
        self._ports += 1
        up, down = Pipe(self, src, host, True), Pipe(self, host, src, False)
        up.dst_inc, down.dst_inc = lst.inc, me
        mine = End(down, up, (host, port))
        theirs = End(up, down, (src, self._ports))
        for inc, end in ((me, mine), (lst.inc, theirs)):
            if inc is not None:
                self._ends.setdefault(inc, []).append(end)
        self.loop.spawn(lst.inc, lst.handler(theirs, theirs), name=f"conn {src}->{host}:{port}")
        return mine, mine

    def process_died(self, inc: Incarnation, *, kernel_too: bool = False) -> None:
        """Its kernel closes its sockets: every peer reads end-of-stream after one delay (what the
        sockets held is sent first). With `kernel_too` (a power loss) what they held is gone."""
        for end in self._ends.pop(inc, []):
            if kernel_too:
                end.outbound.held.clear()
            if not end.closed:
                end.closed = True
                end.outbound.send(None)
        for key, lst in list(self.listeners.items()):
            if lst.inc is inc:
                del self.listeners[key]

    # --- decoded requests (the simulated client) -------------------------------------------------
    async def request(self, src: str, host: str, port: int, api_key: int, version: int, req: Any,
                      timeout: float | None = None) -> Any:
        """Send a decoded request to the broker listening at (host, port); its (version, body), or
        None for an acks=0 produce. Raises ConnectionRefusedError when nobody listens, TimeoutError
        when no answer came within `timeout` (a lost packet never answers: without a timeout the
        call never returns). The timeout is a timer on the caller's future, not `asyncio.wait_for`,
        which would spawn a task per request."""
        lst = self.listeners.get((host, port))
        if lst is None or lst.answer is None or (lst.inc is not None and lst.inc.dead):
            d = self.delay(src, host)
            if timeout is not None and d > timeout:
                await asyncio.sleep(timeout)
                raise TimeoutError
            await asyncio.sleep(d)
            raise ConnectionRefusedError(f"{host}:{port}: connection refused")
        me = NODE.get()
        fut: asyncio.Future[Any] = self.loop.create_future()
        timer = None
        if timeout is not None:
            def expire() -> None:
                if not fut.done():
                    fut.set_exception(TimeoutError())

            timer = self.loop.call_later(timeout, expire)
        try:
            if self.dropped(src, host) or self.port_blocked(src, host, "to-port"):
                return await fut
            answer = lst.answer

            def reply(result: Any) -> None:
                if not fut.done():
                    fut.set_result(result)

            async def serve() -> None:
                result = await answer(api_key, version, req, f"/{src}")
                if not (self.dropped(host, src) or self.port_blocked(host, src, "from-port")):
                    self.loop.call_in(me, self.delay(host, src), reply, result)

            def arrive() -> None:
                if lst.inc is not None and lst.inc.dead:
                    return
                if self.port_blocked(src, host, "hold"):  # held in the pipe: it arrives after the lift, in order
                    self.held.append((src, host, lst.inc, arrive))
                    return
                self.loop.spawn(lst.inc, serve())

            self.loop.call_in(lst.inc, self.delay(src, host), arrive)
            return await fut
        finally:
            if timer is not None:
                timer.cancel()


class HostNetwork:
    """One host's `logbroker.net.Network`."""

    def __init__(self, net: SimNetwork, name: str) -> None:
        self.net, self.name = net, name

    async def listen(self, handler: Callable[[Any, Any], Coroutine[Any, Any, None]], host: str, port: int) -> Listener:
        return self.net.listen(self.name, port, handler)

    async def connect(self, host: str, port: int) -> tuple[End, End]:
        return await self.net.connect(self.name, host, port)
