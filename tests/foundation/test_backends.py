"""Every combination of backend, fault family and consumer mode works or is refused in one sentence,
before anything starts: a family says which capabilities it acts through (`Family.needs`), each
backend's DB implements them or not, and the registry holds one against the other."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pytest

from harness.provision.sim import SimDB
from harness.registry import build_test, make_db
from kernel.errors import UsageError
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld
from kernel.spec import build_spec
from nemesis import registry

CHAOS = str(Path(sys.executable).parent / "chaos")


@runtime_checkable
class Teleport(Protocol):
    """A capability no backend has."""

    def teleport(self, node: str) -> None: ...


class TeleportFamily:
    name = "teleport"
    about = {"one": "a test fault"}
    kinds = ("one",)
    perf = FaultPerf("start-teleport", "stop-teleport", "teleport", "#000000")
    composite = False
    needs: tuple[type, ...] = (Teleport,)

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        return Plan()

    async def start(self, ctx: NemesisContext, fault: PlannedFault, out: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        return {}

    def heal(self, ctx: NemesisContext) -> None:
        return None


@pytest.mark.parametrize("provisioner", ["sim", "docker"])
def test_a_family_the_backend_cannot_act_out_is_refused_before_anything_starts(
        monkeypatch: pytest.MonkeyPatch, provisioner: str) -> None:
    monkeypatch.setitem(registry.FAMILIES, "teleport", TeleportFamily)
    monkeypatch.setattr(registry, "DEFAULT", (*registry.DEFAULT, "teleport"))
    with pytest.raises(UsageError, match=f"the {provisioner} backend cannot act out nemesis 'teleport': it has no "
                                         "Teleport capability"):
        build_test(build_spec({"provisioner": provisioner, "nemesis": "kill,teleport"}))
    # `all` is every kind the system and the backend can take (Jepsen's `satisfies?`): it leaves teleport out
    assert "teleport" not in build_test(build_spec({"provisioner": provisioner})).spec.nemesis


def test_every_family_is_acted_out_by_both_backends() -> None:
    sim, containers = SimDB(build_spec({"provisioner": "sim"})), make_db(build_spec({}))
    for name, make in registry.FAMILIES.items():
        fam = make()
        assert fam.needs, f"{name} names no capability"
        for db in (sim, containers):
            assert all(isinstance(db, cap) for cap in fam.needs), (name, type(db).__name__)
    spec = build_test(build_spec({"provisioner": "sim"})).spec
    assert spec.nemesis == registry.DEFAULT  # `all`, expanded before the run: test.json names every family


@pytest.mark.parametrize(("values", "says"), [
    ({"provisioner": "sim", "leave_running": True}, "--leave-running needs containers"),
    ({"check_determinism": True}, "--check-determinism needs --provisioner sim"),
])
def test_combinations_a_backend_cannot_do_are_one_sentence(values: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        build_test(build_spec(values))


@pytest.mark.parametrize("sub_via", ["assign", "subscribe", "assign,subscribe"])
@pytest.mark.parametrize("provisioner", ["sim", "docker"])
def test_both_consumer_modes_run_on_both_backends(provisioner: str, sub_via: str) -> None:
    assert build_test(build_spec({"provisioner": provisioner, "sub_via": sub_via})).spec.sub_via == tuple(
        sub_via.split(","))


def test_the_cli_refuses_what_the_simulator_cannot_do_with_exit_3(tmp_path: Path) -> None:
    out = subprocess.run([CHAOS, "run", "--provisioner", "sim", "--leave-running", "--store",
                          str(tmp_path / "store")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "--leave-running needs containers" in out.stderr
    assert not (tmp_path / "store").exists()  # refused before anything started
