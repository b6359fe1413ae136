"""Both backends can say which leader each broker names to clients (`kernel.db.HasLeaderViews`): the
drain writes that down when it gives up, so an operator sees which broker sent the client astray; and
each partition's LSO and HW (`HasStableEnds`), from which the harness tells a hanging transaction."""

from __future__ import annotations

from harness.provision.sim import SimDB, SimProvisioner
from harness.registry import make_db
from kernel.db import HasLeaderViews, HasStableEnds, LeaderView, StableEnd
from kernel.spec import build_spec


def test_both_backends_have_the_capabilities() -> None:
    for cap in (HasLeaderViews, HasStableEnds):
        assert isinstance(SimDB(build_spec({"provisioner": "sim"})), cap)
        assert isinstance(make_db(build_spec({})), cap)


def test_simulated_brokers_agree_with_the_controller_and_a_killed_one_says_so() -> None:
    spec = build_spec({"provisioner": "sim", "nodes": 3, "partitions": 2, "seed": 5})
    prov = SimProvisioner()
    db = SimDB(spec)
    db.setup(prov.connect(prov.up(3)))
    try:
        db.create_topic("chaos", 2, 3)
        views = db.leader_views("chaos")
        assert sorted(views) == ["n1", "n2", "n3"]
        for p in (0, 1):
            state = db.sim.leader("chaos", p)
            named = {v[p].leader for v in views.values() if isinstance(v, dict)}
            assert len(named) == 1 and all(isinstance(v[p], LeaderView) for v in views.values() if isinstance(v, dict))
            assert f"n{named.pop()}" == state
        ends = db.stable_ends("chaos", 2)  # no transaction: every LSO is the HW
        assert sorted(ends) == [0, 1] and all(isinstance(e, StableEnd) and e.lso == e.hw for e in ends.values())
        assert db.open_transactions() == {}
        db.kill(db.nodes[0])
        after = db.leader_views("chaos")
        assert after["n1"] == "no answer (down or paused)"
        assert all(isinstance(after[n], dict) for n in ("n2", "n3"))
    finally:
        db.teardown(prov.connect([]))
