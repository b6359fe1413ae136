"""The schedule with overlapping faults and compositions: still a pure function of the seed."""

from __future__ import annotations

from kernel.nemesis import PlanWorld
from kernel.spec import DEFAULT_NEMESIS
from nemesis.registry import DEFAULT, expand, resolve, split
from nemesis.schedule import plan

WORLD = PlanWorld(["n1", "n2", "n3", "n4", "n5"], 4, session_timeout_s=6.0, replica_lag_s=10.0)


def _active_at(faults: list, t: float) -> int:  # type: ignore[type-arg]
    return sum(1 for f in faults if f.at_s <= t < f.at_s + f.duration_s)


def test_at_most_max_active_faults_at_once_and_some_overlap() -> None:
    for k in (1, 2, 3):
        faults = plan(9, list(DEFAULT), interval_s=5.0, time_limit_s=300.0, world=WORLD, max_active=k)
        points = sorted({f.at_s for f in faults} | {f.at_s + f.duration_s - 1e-6 for f in faults})
        peak = max(_active_at(faults, t) for t in points)
        assert peak <= k, f"max_active {k}: {peak} faults at once"
        if k > 1:
            assert peak > 1, "with room for overlap, some faults do overlap"
    def again() -> list[dict]:  # type: ignore[type-arg]
        return [f.to_json() for f in plan(9, list(DEFAULT), interval_s=5.0, time_limit_s=300.0, world=WORLD,
                                          max_active=2)]

    assert again() == again()


def test_compositions_get_the_time_they_need_and_targets_within_the_topic() -> None:
    faults = plan(3, ["zombie", "lagging-follower", "double-failover"], interval_s=4.0, time_limit_s=400.0,
                  world=WORLD, max_active=2)
    assert {f.family for f in faults} == {"zombie", "lagging-follower", "double-failover"}
    for f in faults:
        if f.family == "zombie":
            assert f.duration_s > WORLD.session_timeout_s, "a zombie's pause outlasts the session"
        if f.family == "lagging-follower":
            assert f.duration_s > f.params["lag_s"] > WORLD.replica_lag_s
        for t in f.targets.values():
            assert t.key is None or 0 <= t.key < WORLD.partitions, "planned against the real partition count"
        assert f.params.get("key", 0) < WORLD.partitions


def test_names_split_at_the_longest_family() -> None:
    assert split("double-failover") == ("double-failover", None)
    assert split("double-failover-kill") == ("double-failover", "kill")
    assert split("isolate-zookeeper") == ("isolate", "zookeeper")
    assert split("partition-one-way") == ("partition", "one-way")
    assert split("lagging-follower-pause-leader") == ("lagging-follower", "pause-leader")
    assert split("partition-sideways") is None
    assert ("power-loss", "majority") in expand(["power-loss"])


def test_the_default_mix_is_every_family() -> None:
    assert resolve(DEFAULT_NEMESIS) == DEFAULT
