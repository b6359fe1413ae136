"""The schedule is a pure function of the seed; names are validated before anything starts."""

from __future__ import annotations

import pytest

from harness.db import iptables
from harness.registry import preflight
from kernel.errors import UsageError
from kernel.nemesis import PlanWorld
from kernel.spec import build_spec
from nemesis import grudge, validate
from nemesis.schedule import plan

NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_same_seed_same_schedule_and_another_seed_differs() -> None:
    kw = {"interval_s": 5.0, "time_limit_s": 120.0, "world": PlanWorld(NODES, 3)}
    a = plan(42, ["partition", "pause", "clock", "kill-controller"], **kw)  # type: ignore[arg-type]
    b = plan(42, ["partition", "pause", "clock", "kill-controller"], **kw)  # type: ignore[arg-type]
    c = plan(43, ["partition", "pause", "clock", "kill-controller"], **kw)  # type: ignore[arg-type]
    assert [f.to_json() for f in a] == [f.to_json() for f in b]
    assert [f.to_json() for f in a] != [f.to_json() for f in c]
    assert len(a) >= 8 and all(f.at_s + f.duration_s <= 120.0 + 1e-6 for f in a)
    assert {f.family for f in a} <= {"partition", "pause", "clock", "kill"}
    starts = [f.at_s for f in a]
    assert starts == sorted(starts)
    for prev, nxt in zip(a, a[1:], strict=False):  # max_active=1: faults never overlap
        assert nxt.at_s >= prev.at_s + prev.duration_s


def test_grudges() -> None:
    assert grudge.halves(["n1", "n2", "n3", "n4", "n5"]) == {
        "n1": ["n3", "n4", "n5"], "n2": ["n3", "n4", "n5"], "n3": ["n1", "n2"], "n4": ["n1", "n2"], "n5": ["n1", "n2"]}
    assert grudge.isolate("n2", ["n1", "n2", "n3"]) == {"n1": ["n2"], "n3": ["n2"], "n2": ["n1", "n3"]}
    assert grudge.one_way("n2", ["n1", "n2", "n3"]) == {"n2": ["n1", "n3"]}
    b = grudge.bridge(["n1", "n2", "n3", "n4", "n5"])
    assert b["n3"] == [] and b["n1"] == ["n4", "n5"] and b["n5"] == ["n1", "n2"]


def test_port_rules_drop_requests_to_a_port_or_answers_from_it() -> None:
    """`ports` cut what a peer sends to our service; `from_ports` mute the answers a peer's service
    sends back on connections we opened. Undoing deletes exactly the rules that were added."""
    add = iptables.drop_commands(["10.0.0.2"], (9092,), None, (2181,))
    assert "iptables -A CHAOS -s 10.0.0.2 -p tcp --dport 9092 -j DROP" in add
    assert "iptables -A CHAOS -s 10.0.0.2 -p tcp --sport 2181 -j DROP" in add
    undo = iptables.undrop_commands(["10.0.0.2"], (), None, (9092,))
    assert "iptables -D CHAOS -s 10.0.0.2 -p tcp --sport 9092 -j DROP" in undo and "--dport" not in undo
    assert "--sport" not in iptables.drop_commands(["10.0.0.2"], (9092,))


def test_validation_is_one_sentence_before_anything_starts() -> None:
    validate(["partition", "kill-controller", "clock-bump"])
    with pytest.raises(UsageError, match="unknown nemesis 'partition-sideways'"):
        validate(["partition-sideways"])
    hosts = tmp_hosts()
    with pytest.raises(UsageError, match="needs libfaketime"):
        preflight(build_spec({"provisioner": "ssh", "hosts": hosts, "nemesis": "clock"}))
    with pytest.raises(UsageError, match="needs the node image's lazyfs"):
        preflight(build_spec({"provisioner": "ssh", "hosts": hosts, "nemesis": "kill,power-loss"}))
    preflight(build_spec({"provisioner": "ssh", "hosts": hosts, "nemesis": "kill,partition,pause"}))


def tmp_hosts() -> str:
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)  # noqa: SIM115
    f.write("n1 10.0.0.1\nn2 10.0.0.2\nn3 10.0.0.3\n")
    f.close()
    return f.name
