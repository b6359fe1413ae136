"""Small values of the ground floor: the seed rule, confined deletes, the spec schema, targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.errors import UsageError
from kernel.names import check_name, remove_inside
from kernel.nemesis import PlannedFault, Target
from kernel.rng import rng, stream_seed
from kernel.spec import RunSpec, build_spec


def test_one_rule_for_every_random_stream() -> None:
    assert stream_seed(42, "nemesis", "plan") == stream_seed(42, "nemesis", "plan")
    assert stream_seed(42, "nemesis", "plan") != stream_seed(43, "nemesis", "plan")
    assert stream_seed(42, "a", 1) != stream_seed(42, "a", 2)
    # stable across processes and Python versions (a hash of text, not Python's salted hash)
    assert stream_seed(1, "x") == int.from_bytes(__import__("hashlib").sha256(b"1/x").digest()[:8], "big")
    assert [rng(7, "w", 0).random() for _ in range(2)] == [rng(7, "w", 0).random()] * 2


def test_names_are_identifiers() -> None:
    for ok in ("chaos", "pytest-123", "a_b", "N1"):
        assert check_name(ok) == ok
    for bad in ("", ".", "..", "../x", "a/b", "-x", "a b", "x" * 49, "a.b", None, 3):
        with pytest.raises(UsageError):
            check_name(bad)


def test_remove_inside_refuses_anything_outside_its_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "c").mkdir(parents=True)
    (root / "c" / "made").write_text("ours")
    (root / "c" / "users").write_text("theirs")
    (tmp_path / "outside").write_text("keep")
    for bad in (tmp_path, root, root / "..", tmp_path / "outside"):
        with pytest.raises(UsageError):
            remove_inside(bad, root)
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(UsageError):
        remove_inside(root / "link", root)
    remove_inside(root / "c", root, only=["made"])
    assert not (root / "c" / "made").exists() and (root / "c" / "users").exists(), "only what we made goes"
    assert (tmp_path / "outside").read_text() == "keep"


def test_spec_schema_round_trips_and_normalises() -> None:
    s = build_spec({"nodes": 3, "nemesis": "partition,kill", "acks": -1, "time_limit": 10, "seed": 5})
    assert s.nemesis == ("partition", "kill") and s.acks == "all" and s.time_limit == 10.0
    assert RunSpec.from_json(s.to_json()) == s
    with pytest.raises(UsageError, match="must be an integer"):
        build_spec({"nodes": True})


def test_planned_faults_and_targets_round_trip() -> None:
    f = PlannedFault(3, "kill", "leader", 1.5, 2.0, {"victim": Target.leader(2, "n1")}, {"x": 1})
    assert PlannedFault.from_json(f.to_json()) == f
    assert Target.follower(1, "n2", lagging=True).describe() == "follower(1, lagging)"
    assert not Target.of_node("n3").live and Target.controller("n1").live


def test_a_run_is_filed_under_its_workload_unless_named() -> None:
    """`store/txn/...` for a transactional run: the store's first level says what a run did."""
    assert build_spec({}).name == "queue"
    assert build_spec({"workload": "txn"}).name == "txn"
    assert build_spec({"workload": "hotkey"}).name == "hotkey"
    assert build_spec({"workload": "txn", "name": "nightly-txn"}).name == "nightly-txn"
    # a replayed test.json keeps the name it was stored under
    assert build_spec({"workload": "txn", "name": "queue"}).name == "queue"
