"""Systems under test as parts: declarations, what a fault kind needs of them, features, settings once."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.registry import build_test, features_needed, kind_refusals
from harness.systems import get_system
from harness.systems.process.config import load
from kernel.errors import UsageError
from kernel.nemesis import kind_needs
from kernel.spec import build_spec
from kernel.system import Need, Process, SystemDecl, check_features
from nemesis import registry
from workloads.registry import get_workload

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "systems" / "logbroker.toml"


def _refuse_for(decl: SystemDecl):  # type: ignore[no-untyped-def]
    def why(fam, kind):  # type: ignore[no-untyped-def]
        missing = decl.missing(kind_needs(fam, kind))
        return None if missing is None else f"{fam.name}-{kind} needs {missing.describe()}"
    return why


def test_our_broker_takes_every_kind_so_all_is_every_family_as_before() -> None:
    decl = get_system("").decl
    for name, make in registry.FAMILIES.items():
        fam = make()
        for kind in fam.kinds:
            assert decl.missing(kind_needs(fam, kind)) is None, f"{name}-{kind}"
    assert registry.resolve(["all"], _refuse_for(decl)) == registry.DEFAULT
    assert build_test(build_spec({"provisioner": "sim"})).spec.system == "logbroker"  # test.json names it


def test_a_system_without_a_metadata_store_or_controller_gets_only_what_it_can_take() -> None:
    solo = SystemDecl("solo", (Process("broker", ("broker",), (9092,), frozenset({"kill", "pause", "net"})),))
    why = _refuse_for(solo)
    got = registry.resolve(["all"], why)
    assert "partition-halves" in got and "partition" not in got and "partition-zookeeper" not in got
    assert "pause-zookeeper" not in got and "kill-controller" not in got and "kill-leader" in got
    assert not any(n.startswith(("clock", "isolate-zookeeper", "lose-unfsynced", "power-loss")) for n in got), got
    assert registry.resolve(["kill"], why) == ("kill-one", "kill-leader", "kill-all")  # a family named whole
    with pytest.raises(UsageError, match="kill-controller needs a controller process the harness can kill"):
        registry.resolve(["kill-controller"], why)
    with pytest.raises(UsageError, match="clock-bump needs a broker process the harness can skew the clock of"):
        registry.resolve(["clock"], why)  # no kind of it is left


def test_every_kind_needs_a_broker_or_names_the_role_it_hits() -> None:
    for name, make in registry.FAMILIES.items():
        fam = make()
        for kind in fam.kinds:
            needs = kind_needs(fam, kind)
            assert needs, f"{name}-{kind} names nothing it needs"
            if "zookeeper" in kind:
                assert Need("metadata-store", "net") in needs or Need("metadata-store", "pause") in needs
            if "controller" in kind:
                assert any(n.role == "controller" for n in needs), f"{name}-{kind}"


def test_a_workload_names_the_features_it_needs_and_the_brokers_are_asked() -> None:
    txn = build_spec({"workload": "txn", "sub_via": "subscribe"})
    assert set(features_needed(txn, get_workload("txn"))) == {"transactions", "consumer-groups", "idempotence"}
    plain = build_spec({"idempotence": False, "acks": "1"})
    assert features_needed(plain, get_workload("queue")) == ()
    with pytest.raises(UsageError, match="its brokers do not advertise AddOffsetsToTxn, EndTxn"):
        check_features("tansu", ["transactions"], {0, 1, 3, 22, 24, 28})
    check_features("ours", ["transactions", "idempotence"], set(range(60)))


def test_a_session_timeout_set_through_the_spec_reaches_the_fault_plan() -> None:
    spec = build_spec({"extra": {"zookeeper.session.timeout.ms": "9000", "replica.lag.time.max.ms": "4000"}})
    t = get_system(spec.system).timeouts(spec)
    assert (t.session_s, t.replica_lag_s) == (9.0, 4.0)
    with pytest.raises(UsageError, match="zookeeper.session.timeout.ms must be a positive number"):
        build_test(build_spec({"provisioner": "sim", "extra": {"zookeeper.session.timeout.ms": "soon"}}))


def test_the_shipped_process_file_describes_our_broker() -> None:
    c = load(EXAMPLE)
    assert [p.name for p in c.processes] == ["zookeeper", "broker"] and c.port == 9092
    decl = get_system(f"process:{EXAMPLE}").decl
    assert decl.process("metadata-store").name == "zookeeper"  # type: ignore[union-attr]
    assert decl.ports("metadata-store") == (2181, 2888, 3888)
    refused = kind_refusals(f"process:{EXAMPLE}")
    assert sorted(refused) == ["move-elect", "move-reassign"], refused  # reassignment is our native extra
    assert "Reassignable" in refused["move-reassign"]


def test_a_file_with_two_disks_is_refused(tmp_path: Path) -> None:
    """A node has one FUSE disk (one lazyfs pid file): two processes naming a `disk` cannot both get one."""
    text = EXAMPLE.read_text().replace('pid_file = "/run/chaos/zookeeper.pid"',
                                       'pid_file = "/run/chaos/zookeeper.pid"\ndisk = "/var/lib/chaos-zookeeper"')
    f = tmp_path / "two.toml"
    f.write_text(text)
    with pytest.raises(UsageError, match="only one process may name a `disk`"):
        load(f)
