"""The cycle search (`results.cycles`) on small graphs whose cycles are known: Elle's names and precedence,
which ones need a ww edge, the real-time chain, and examples that are real cycles of the graph. No Spark."""

from __future__ import annotations

import numpy as np
import pytest

from results.cycles import RT, WR, WW, Found, Ops, build, find_cycles


def _ops(*spans: tuple[int, int, bool]) -> Ops:
    """(invoke index, completion index, ok) per op."""
    a = np.array(spans, dtype=np.int64).reshape(-1, 3)
    return Ops(a[:, 1], a[:, 0], a[:, 2].astype(bool))


def _find(edges: list[tuple[int, int, int]], ops: Ops) -> dict[str, Found]:
    e = np.array(edges, dtype=np.int64).reshape(-1, 3)
    return find_cycles(build(e[:, 0], e[:, 1], e[:, 2], ops))


CONCURRENT = _ops((0, 2, True), (1, 3, True))  # two ops, each invoked before the other completed


def test_no_edges_no_cycles() -> None:
    assert _find([], CONCURRENT) == {}


def test_ww_alone_is_g0_and_never_without_ww() -> None:
    got = _find([(2, 3, WW), (3, 2, WW)], CONCURRENT)
    assert list(got) == ["G0"] and got["G0"].count == 1 and got["G0"].without_ww == 0
    assert got["G0"].examples[0]["steps"] == ["ww", "ww"]


def test_wr_alone_is_g1c_found_without_ww() -> None:
    got = _find([(2, 3, WR), (3, 2, WR)], CONCURRENT)
    assert list(got) == ["G1c"] and got["G1c"].without_ww == 1
    ex = got["G1c"].examples[0]
    assert ex["cycle"][0] == ex["cycle"][-1] and set(ex["cycle"]) == {2, 3} and ex["steps"] == ["wr", "wr"]


def test_ww_and_wr_is_g1c_that_needs_ww() -> None:
    got = _find([(2, 3, WR), (3, 2, WW)], CONCURRENT)
    assert list(got) == ["G1c"] and got["G1c"].without_ww == 0


def test_g0_makes_g1c_of_its_component_redundant_as_in_elle() -> None:
    ops = _ops((0, 3, True), (1, 4, True), (2, 5, True))
    got = _find([(3, 4, WW), (4, 3, WW), (4, 5, WR), (5, 3, WR)], ops)
    assert "G0" in got and "G1c" not in got  # without ww: 3 -> ... no wr cycle alone either


def test_real_time_order_makes_g0_realtime_and_g1c_realtime() -> None:
    # op 1 completes (index 1) before op 2 is invoked (index 2): 1 precedes 3 in real time
    seq = _ops((0, 1, True), (2, 3, True))
    ww_back = _find([(3, 1, WW)], seq)  # offsets say the later send came first
    assert list(ww_back) == ["G0-realtime"] and ww_back["G0-realtime"].without_ww == 0
    assert sorted(ww_back["G0-realtime"].examples[0]["steps"]) == ["rt", "ww"]
    read_future = _find([(3, 1, WR)], seq)  # the earlier op read what the later one sent
    assert list(read_future) == ["G1c-realtime"] and read_future["G1c-realtime"].without_ww == 1
    assert sorted(read_future["G1c-realtime"].examples[0]["steps"]) == ["rt", "wr"]


def test_concurrent_ops_get_no_real_time_edge() -> None:
    assert _find([(3, 2, WR)], CONCURRENT) == {}
    assert _find([(2, 3, WR)], CONCURRENT) == {}


def test_failed_and_info_ops_are_not_followed_in_real_time() -> None:
    """Elle: only an ok completion precedes what is invoked after it."""
    info_first = _ops((0, 1, False), (2, 3, True))
    assert _find([(3, 1, WR)], info_first) == {}


def test_the_chain_orders_across_many_ops_without_quadratic_edges() -> None:
    n = 2000
    seq = _ops(*[(2 * i, 2 * i + 1, True) for i in range(n)])
    g = build(np.array([2 * n - 1]), np.array([1]), np.array([WR]), seq)
    assert len(g.src) < 5 * n  # chain + two links per op, not n^2
    got = find_cycles(g)
    assert list(got) == ["G1c-realtime"]
    assert len(got["G1c-realtime"].examples[0]["cycle"]) == 3  # the chain walk is one rt step


@pytest.mark.parametrize("seed", range(20))
def test_every_example_is_a_cycle_of_the_graph(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 12
    ops = _ops(*sorted((int(a), int(a) + int(rng.integers(1, 6)), bool(rng.random() < 0.8))
                       for a in rng.choice(np.arange(0, 200, 7), n, replace=False)))
    idx = ops.index.tolist()
    edges = [(idx[int(a)], idx[int(b)], int(rng.integers(0, 2))) for a, b in rng.integers(0, n, (18, 2)) if a != b]
    got = _find(edges, ops)
    have = {(a, b, ("ww", "wr")[r]) for a, b, r in edges}
    done = dict(zip(ops.index.tolist(), ops.invoke.tolist(), strict=True))
    ok = dict(zip(ops.index.tolist(), ops.ok.tolist(), strict=True))
    for found in got.values():
        for ex in found.examples:
            cyc, steps = ex["cycle"], ex["steps"]
            assert cyc[0] == cyc[-1] and len(steps) == len(cyc) - 1
            for a, b, s in zip(cyc[:-1], cyc[1:], steps, strict=True):
                if s == "rt":
                    assert ok[a] and a < done[b], (a, b)  # a completed ok before b was invoked
                else:
                    assert (a, b, s) in have, (a, b, s)
    assert RT == 2
