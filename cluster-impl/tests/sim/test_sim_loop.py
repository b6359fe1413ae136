"""The scheduler model (`logsim.loop`): virtual time, seeded order, paused and dead incarnations."""

from __future__ import annotations

import asyncio

import pytest
from logsim.loop import Deadlock, Incarnation, SimLoop


def _run(loop: SimLoop, coro: object) -> object:
    try:
        return loop.run_until_complete(coro)  # type: ignore[arg-type]
    finally:
        loop.shutdown()


def test_time_jumps_to_the_next_timer() -> None:
    loop = SimLoop(1)

    async def main() -> float:
        await asyncio.sleep(3600)
        return loop.time()

    assert _run(loop, main()) == pytest.approx(3600, abs=1e-6)


def test_a_paused_node_is_held_and_resumes_with_its_view() -> None:
    loop = SimLoop(2)
    inc = Incarnation("n1", 1)
    seen: list[float] = []

    async def ticker() -> None:
        while True:
            await asyncio.sleep(1.0)
            seen.append(round(loop.time(), 3))

    async def main() -> None:
        loop.spawn(inc, ticker())
        await asyncio.sleep(2.5)
        loop.pause(inc)
        await asyncio.sleep(5.0)
        loop.resume(inc)
        await asyncio.sleep(1.2)

    _run(loop, main())
    assert seen == [1.0, 2.0, 7.5, 8.5]  # the timer due at 3.0 fired at the resume (7.5), then every second


def test_a_dead_node_never_runs_again_not_even_its_finally() -> None:
    loop = SimLoop(3)
    inc = Incarnation("n1", 1)
    ran: list[str] = []

    async def victim() -> None:
        try:
            await asyncio.sleep(10)
            ran.append("woke")
        finally:
            ran.append("finally")

    async def main() -> None:
        loop.spawn(inc, victim())
        await asyncio.sleep(1)
        loop.kill(inc)
        await asyncio.sleep(20)

    loop.run_until_complete(main())
    assert ran == []
    loop.close()


def test_nothing_to_wake_anyone_is_a_deadlock() -> None:
    loop = SimLoop(4)

    async def main() -> None:
        await loop.create_future()

    with pytest.raises(Deadlock):
        loop.run_until_complete(main())
    loop.close()


def _order(seed: int) -> list[int]:
    loop = SimLoop(seed)
    out: list[int] = []

    async def main() -> None:
        for i in range(20):
            loop.call_later(1.0, out.append, i)  # all due at the same instant
        await asyncio.sleep(2)

    _run(loop, main())
    return out


def test_timers_due_together_are_ordered_by_the_seed() -> None:
    assert _order(7) == _order(7)
    assert sorted(_order(7)) == list(range(20))
    assert len({tuple(_order(s)) for s in range(5)}) > 1


def test_a_task_that_reaches_a_dead_process_never_runs_and_never_complains() -> None:
    """A connection that arrives after its process died is spawned into the dead incarnation: its
    first step is dropped, and its coroutine is closed, not left to warn "never awaited" when collected."""
    import gc
    import warnings

    loop = SimLoop(1)
    inc = Incarnation("n1", 1)
    ran: list[bool] = []

    async def serve() -> None:
        ran.append(True)

    loop.kill(inc)
    loop.spawn(inc, serve(), name="conn")
    loop.advance_to(0.5)
    del inc
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    loop.shutdown()
    assert not ran
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_a_task_not_yet_started_when_its_process_dies_never_complains() -> None:
    """A connection reaches a paused process (its first step is held) and the process is killed: the
    task is dropped with the incarnation, and its coroutine is closed rather than collected unawaited."""
    import gc
    import warnings

    loop = SimLoop(2)
    inc = Incarnation("n1", 1)

    async def serve() -> None:
        await asyncio.sleep(1)

    loop.pause(inc)
    loop.spawn(inc, serve(), name="conn")
    loop.advance_to(0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop.kill(inc)
        loop.advance_to(1.0)
        del inc
        gc.collect()
    loop.shutdown()
    assert not [w for w in caught if "never awaited" in str(w.message)]
