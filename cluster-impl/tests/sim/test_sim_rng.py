"""The simulator draws every random choice by the harness's one rule (`kernel/rng.py`): logsim restates
it (cluster-impl imports nothing of the harness), and the two must agree stream for stream."""

from __future__ import annotations

from logsim.cluster import SimCluster
from logsim.rng import stream, streams

from kernel.rng import rng


def test_logsim_and_the_kernel_derive_the_same_streams() -> None:
    for seed, path in [(0, ("sim", "loop")), (42, ("sim", "link", "n1", "n2")), (2**40, ("sim", "power-loss"))]:
        assert [stream(seed, *path).random() for _ in range(3)] == [rng(seed, *path).random() for _ in range(3)]
    assert streams(7)("loop").random() == rng(7, "sim", "loop").random()


def test_a_cluster_draws_from_the_streams_it_is_given() -> None:
    taken: list[tuple[object, ...]] = []

    def given(*path: object) -> object:
        taken.append(path)
        return rng(3, "sim", *path)

    with SimCluster(3, 3, streams=given) as c:  # type: ignore[arg-type]
        c.start()
        c.run_for(2.0)
    assert ("loop",) in taken and ("power-loss",) in taken and any(p[0] == "link" for p in taken)
