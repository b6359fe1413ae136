"""The coverage guide of `chaos sim-search --guide coverage`: fresh seeds until a seed reaches a probe no
earlier one did, then half of each round mutates the schedules of those seeds, the ones that reached
rare probes most; the same first seed gives the same candidates (every choice from the search's seed)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from harness import coverage_guide
from harness.coverage_guide import Candidate, CoverageGuide, Entry, Schedule, mutate, splice
from harness.registry import build_test
from harness.sim_search import Simulated, search
from kernel.spec import build_spec

SCHEDULE: Schedule = [
    {"id": 1, "family": "kill", "kind": "kill", "at_s": 5.0, "duration_s": 2.0, "targets": {}, "params": {}},
    {"id": 2, "family": "pause", "kind": "pause", "at_s": 12.0, "duration_s": 3.0, "targets": {}, "params": {}}]


def test_fresh_seeds_until_something_new_then_mutants_of_what_found_it() -> None:
    g = CoverageGuide(first_seed=10, time_limit=30.0)
    first = g.candidates(4)
    assert [(c.seed, c.faults) for c in first] == [(10, None), (11, None), (12, None), (13, None)]
    assert g.observe(10, SCHEDULE, {"a": 1}) == ["a"]
    assert g.observe(11, SCHEDULE, {"a": 3}) == []  # nothing new: not kept
    assert g.corpus == [Entry(10, SCHEDULE, frozenset({"a"}))]
    later = [c for _ in range(10) for c in g.candidates(4)]
    fresh = [c.seed for c in later if c.faults is None]
    assert fresh == list(range(14, 14 + len(fresh)))  # the plain search goes on, seed after seed
    mutants = [c for c in later if c.faults is not None]
    assert mutants and all(c.seed == 10 and c.faults != SCHEDULE for c in mutants)
    assert g.covered == {"a": 10} and g.mutants == len(mutants)


def test_the_mutants_share_follows_what_each_kind_of_candidate_finds() -> None:
    """A two-armed bandit: while fresh seeds keep finding new probes they get most of each round; once
    they find nothing and mutants do, the mutants get most, never all."""
    g = CoverageGuide(first_seed=1, time_limit=30.0)
    assert g.share() == 0.0  # nothing to mutate yet
    g.observe(1, SCHEDULE, {"p1": 1})
    assert 0.2 < g.share() < 0.5  # fresh seeds have found something, mutants are untried (the prior)
    for seed in range(2, 32):
        g.observe(seed, SCHEDULE, {f"p{seed}": 1})  # every fresh seed finds something ...
        g.observe(1, SCHEDULE, {"p1": 1}, mutant=True)  # ... and no mutant does
    assert g.share() == coverage_guide.MUTANT_SHARE[0]
    for seed in range(32, 62):
        g.observe(seed, SCHEDULE, {"p1": 1})  # fresh seeds dry up ...
        g.observe(1, SCHEDULE, {f"m{seed}": 1}, mutant=True)  # ... while mutants find new ones
    assert g.share() == coverage_guide.MUTANT_SHARE[1]
    kinds = Counter(c.faults is None for _ in range(200) for c in g.candidates(2))
    assert kinds[False] > 3 * kinds[True] > 0


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


def test_an_entry_that_reached_a_rare_probe_is_mutated_most() -> None:
    """Two entries: the first reached a probe no other run reached, the newest one a probe that every
    later run reached too. The newest-first half of the picks favours the newest; the rarity half
    must more than make up for it."""
    g = CoverageGuide(first_seed=1, time_limit=30.0)
    rare = [dict(f, id=int(f["id"]) + 10) for f in SCHEDULE]
    assert g.observe(1, rare, {"common": 1, "rare": 1}) == ["common", "rare"]
    for seed in range(2, 50):
        g.observe(seed, SCHEDULE, {"common": 2})
    assert g.observe(50, SCHEDULE, {"common": 1, "other": 1}) == ["other"]
    for seed in range(51, 80):
        assert g.observe(seed, SCHEDULE, {"common": 1, "other": 1}) == []
    assert g.rarity(g.corpus[1]) > 20 * g.rarity(g.corpus[0])
    picks = Counter(c.seed for _ in range(100) for c in g.candidates(2) if c.faults is not None)
    assert picks[1] > picks[50], picks


def test_a_splice_adds_one_fault_of_another_schedule() -> None:
    donor = [{"id": 1, "family": "lagging-follower", "kind": "lag", "at_s": 8.0, "duration_s": 4.0,
              "targets": {}, "params": {}}]
    out = splice(SCHEDULE, donor, random.Random(1))
    assert len(out) == 3 and [f for f in out if f["family"] == "lagging-follower"][0]["at_s"] == 8.0
    assert len({f["id"] for f in out}) == 3
    assert [f["at_s"] for f in out] == sorted(f["at_s"] for f in out)
    assert SCHEDULE[0]["id"] == 1 and len(SCHEDULE) == 2  # the inputs untouched


def test_spliced_mutants_appear_once_the_corpus_has_two_entries() -> None:
    g = CoverageGuide(first_seed=1, time_limit=30.0)
    g.candidates(2)
    g.observe(1, SCHEDULE, {"a": 1})
    donor = [{"id": 1, "family": "zombie", "kind": "zombie", "at_s": 20.0, "duration_s": 2.0, "targets": {},
              "params": {}}]
    g.observe(2, donor, {"b": 1})
    mutants = [c.faults for _ in range(60) for c in g.candidates(2) if c.faults is not None]
    families = [{f["family"] for f in m} for m in mutants]
    assert any({"kill", "zombie"} <= fs or {"pause", "zombie"} <= fs for fs in families)


@pytest.mark.slow
def test_a_guided_search_plays_its_mutants_and_spliced_schedules_on_the_simulator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole loop through `search`: each mutant (every one spliced here, once the corpus has two
    entries) runs with exactly the schedule the guide gave, on the seed it was drawn from, and what
    it hits feeds the guide."""
    spliced: list[Schedule] = []

    def splicing(faults: Schedule, donor: Schedule, rng: random.Random) -> Schedule:
        spliced.append(out := splice(faults, donor, rng))
        return out

    monkeypatch.setattr(coverage_guide, "SPLICE_SHARE", 1.0)
    monkeypatch.setattr(coverage_guide, "MUTANT_SHARE", (0.5, 0.5))
    monkeypatch.setattr(coverage_guide, "splice", splicing)
    base = build_test(build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 8.0, "rate": 20.0,
                                  "nemesis_interval": 2.0, "name": "guided"})).spec
    guide = CoverageGuide(first_seed=1, time_limit=8.0)
    given: dict[int, list[Candidate]] = {}
    draw = guide.candidates

    def recording(n: int) -> list[Candidate]:
        out = draw(n)
        given[guide.rounds] = out
        return out

    guide.candidates = recording  # type: ignore[method-assign]
    played: list[Simulated] = []
    out = search(base, first_seed=1, budget_s=600, jobs=2, say=lambda _s: None, max_seeds=12, shrink_found=False,
                 check_batch=0, guide=guide, keep_going=True, on_seed=played.append)
    assert out.seeds == 12 and guide.mutants >= 4 and len(guide.corpus) >= 2 and spliced
    asked = [c for r in sorted(given) for c in given[r]]
    assert [s.seed for s in played] == [c.seed for c in asked]
    for c, s in zip(asked, played, strict=True):
        if c.faults is not None:  # the run played the mutant, not its seed's own schedule
            assert [(f["family"], f["at_s"], f["duration_s"]) for f in s.faults] == \
                [(f["family"], f["at_s"], f["duration_s"]) for f in c.faults]
    assert set(guide.covered) == set(out.first_hit)
