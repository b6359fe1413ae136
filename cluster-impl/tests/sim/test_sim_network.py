"""The network model: ordered pipes, grudges that hold packets until they lift, resets on death."""

from __future__ import annotations

import asyncio
from typing import Any

from logsim.loop import Incarnation, SimLoop
from logsim.network import SimNetwork


def _pair(loop: SimLoop, net: SimNetwork, got: list[tuple[float, bytes]], inc: Incarnation) -> Any:
    async def handler(reader: Any, writer: Any) -> None:
        try:
            while True:
                data = await reader.readexactly(2)
                got.append((loop.time(), data))
        except asyncio.IncompleteReadError:
            got.append((loop.time(), b"EOF"))

    loop.call_in(inc, 0, lambda: net.listen("n2", 9092, handler))
    return handler


def test_a_grudge_holds_packets_in_order_until_it_lifts() -> None:
    loop = SimLoop(1)
    net = SimNetwork(loop, 1)
    got: list[tuple[float, bytes]] = []
    _pair(loop, net, got, Incarnation("n2", 1))

    async def main() -> None:
        await asyncio.sleep(0.1)
        _, w = await net.host("n1").connect("n2", 9092)
        w.write(b"a1")
        await asyncio.sleep(0.1)
        net.add_grudge({"n2": ["n1"]})
        w.write(b"b2")
        w.write(b"c3")
        await asyncio.sleep(5)
        assert [d for _, d in got] == [b"a1"]  # held, not lost
        net.lift_grudge({"n2": ["n1"]})
        w.write(b"d4")
        w.close()
        await asyncio.sleep(1)

    loop.run_until_complete(main())
    assert [d for _, d in got] == [b"a1", b"b2", b"c3", b"d4", b"EOF"]
    assert all(t > 5.2 for t, d in got[1:]), got
    loop.shutdown()


def test_a_dead_process_resets_its_peers_and_refuses_new_connections() -> None:
    loop = SimLoop(2)
    net = SimNetwork(loop, 2)
    inc = Incarnation("n2", 1)
    got: list[tuple[float, bytes]] = []
    _pair(loop, net, got, inc)
    out: list[str] = []

    async def main() -> None:
        await asyncio.sleep(0.1)
        r, w = await net.host("n1").connect("n2", 9092)
        await asyncio.sleep(0.1)
        loop.kill(inc)
        net.process_died(inc)
        try:
            await asyncio.wait_for(r.readexactly(1), 5)
        except asyncio.IncompleteReadError:
            out.append("eof")
        try:
            await net.host("n1").connect("n2", 9092)
        except ConnectionRefusedError:
            out.append("refused")

    loop.run_until_complete(main())
    assert out == ["eof", "refused"]
    loop.shutdown()
