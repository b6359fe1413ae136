"""The coverage guide of `chaos sim-search --guide coverage`: fresh seeds until a seed reaches a probe no
earlier one did, then half of each round mutates the schedules of those seeds; the same first seed
gives the same candidates (every choice from the search's seed)."""

from __future__ import annotations

import random

from harness.coverage_guide import CoverageGuide, mutate

SCHEDULE = [{"id": 1, "family": "kill", "kind": "kill", "at_s": 5.0, "duration_s": 2.0, "targets": {}, "params": {}},
            {"id": 2, "family": "pause", "kind": "pause", "at_s": 12.0, "duration_s": 3.0, "targets": {}, "params": {}}]


def test_fresh_seeds_until_something_new_then_mutants_of_what_found_it() -> None:
    g = CoverageGuide(first_seed=10, time_limit=30.0)
    first = g.candidates(4)
    assert [(c.seed, c.faults) for c in first] == [(10, None), (11, None), (12, None), (13, None)]
    assert g.observe(10, SCHEDULE, {"a": 1}) == ["a"]
    assert g.observe(11, SCHEDULE, {"a": 3}) == []  # nothing new: not kept
    assert g.corpus == [(10, SCHEDULE)]
    second = g.candidates(4)
    assert [c.seed for c in second[:2]] == [14, 15]
    assert all(c.seed == 10 and c.faults is not None and c.faults != SCHEDULE for c in second[2:])
    assert g.covered == {"a": 10} and g.mutants == 2


def test_the_same_start_gives_the_same_mutants() -> None:
    def run() -> list[object]:
        g = CoverageGuide(first_seed=3, time_limit=30.0)
        g.candidates(2)
        g.observe(3, SCHEDULE, {"x": 1})
        return [(c.seed, c.faults) for c in g.candidates(6)]

    assert run() == run()


def test_a_mutant_stays_inside_the_run() -> None:
    rng = random.Random(7)
    for _ in range(200):
        m = mutate(SCHEDULE, rng, 30.0)
        assert m and all(1.0 <= f["at_s"] <= 29.0 and f["duration_s"] > 0 for f in m)
        assert len({f["id"] for f in m}) == len(m)
        assert [f["at_s"] for f in m] == sorted(f["at_s"] for f in m)
