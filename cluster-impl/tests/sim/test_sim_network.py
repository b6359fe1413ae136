"""The network model: ordered pipes, grudges that hold packets until they lift, resets on death."""

from __future__ import annotations

import asyncio
import contextlib
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


def test_port_rules_cut_one_direction_of_requests_and_mute_only_answers() -> None:
    """A `cut` (n2 drops what n1 sends to n2's port) holds n1's requests to n2 but not n1's answers on
    n2's own connection to n1; a `mute` (n1 drops what n2 answers from its port) holds only those
    answers, while n1's requests still arrive — as the compositions' iptables rules do."""
    loop = SimLoop(3)
    net = SimNetwork(loop, 3)
    at_n2: list[tuple[float, bytes]] = []
    _pair(loop, net, at_n2, Incarnation("n2", 1))
    at_n1: list[tuple[float, bytes]] = []

    async def echo(reader: Any, writer: Any) -> None:  # n1 answers whatever n2 sends it
        while True:
            data = await reader.readexactly(2)
            at_n1.append((loop.time(), data))
            writer.write(data.upper())

    loop.call_in(Incarnation("n1", 1), 0, lambda: net.listen("n1", 9092, echo))

    async def main() -> None:
        await asyncio.sleep(0.1)
        r21, w21 = await net.host("n2").connect("n1", 9092)  # n2's connection to n1
        _, w12 = await net.host("n1").connect("n2", 9092)  # n1's connection to n2
        net.add_grudge({"n2": ["n1"]}, scope="to-port")
        w12.write(b"x1")
        w21.write(b"y1")
        assert await asyncio.wait_for(r21.readexactly(2), 1) == b"Y1"  # n1's answer to n2 flows
        await asyncio.sleep(1)
        assert [d for _, d in at_n2] == []  # n1's request to n2 is held
        net.lift_grudge({"n2": ["n1"]}, scope="to-port")
        await asyncio.sleep(0.1)
        assert [d for _, d in at_n2] == [b"x1"]
        net.add_grudge({"n2": ["n1"]}, scope="from-port")  # n2 no longer hears n1's answers
        w21.write(b"z1")
        w12.write(b"x2")
        await asyncio.sleep(1)
        assert [d for _, d in at_n1][-1] == b"z1"  # n2's request arrived
        assert [d for _, d in at_n2] == [b"x1", b"x2"]  # n1's own connection to n2 is untouched
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(r21.readexactly(2), 1)
            raise AssertionError("the muted answer arrived")
        net.lift_grudge({"n2": ["n1"]}, scope="from-port")
        assert await asyncio.wait_for(r21.readexactly(2), 1) == b"Z1"  # retransmitted once lifted

    loop.run_until_complete(main())
    loop.shutdown()


def test_a_held_port_stops_the_streams_to_it_as_an_iptables_drop_does() -> None:
    """A "hold" grudge (`Cut.hold`: requests to the port delayed, not lost) stops a connection's byte
    stream to the port too — a replica fetcher's, not only the decoded requests — and delivers it on
    the lift. It once let the fetcher through: a follower cut this way stayed in the ISR for ever in
    the simulator while in containers it dropped out after the lag time (`held-markers`)."""
    loop = SimLoop(3)
    net = SimNetwork(loop, 3)
    got: list[tuple[float, bytes]] = []
    _pair(loop, net, got, Incarnation("n2", 1))

    async def main() -> None:
        await asyncio.sleep(0.1)
        _, w = await net.host("n1").connect("n2", 9092)
        w.write(b"a1")
        await asyncio.sleep(0.1)
        net.add_grudge({"n2": ["n1"]}, scope="hold")
        w.write(b"b2")
        await asyncio.sleep(5)
        assert [d for _, d in got] == [b"a1"]  # held, not lost
        with contextlib.suppress(TimeoutError):  # a new connection's SYN is dropped too
            await asyncio.wait_for(net.host("n1").connect("n2", 9092), 1.0)
            raise AssertionError("connected across a hold")
        net.lift_grudge({"n2": ["n1"]}, scope="hold")
        w.close()
        await asyncio.sleep(1)

    loop.run_until_complete(main())
    assert [d for _, d in got] == [b"a1", b"b2", b"EOF"]
    assert got[1][0] > 5.1, got
    loop.shutdown()
