"""The architecture as a test: arrows point down only (docs/design.md, "Layers and imports").

It reads every module's imports with `ast` (the reader of `docs/layers.py`, which also draws the
picture; top-level and function-local alike, only `TYPE_CHECKING` blocks skipped) and fails on:
- an import cycle between top-level packages, or between `harness/`'s own modules and subpackages;
- the ground floor (`kernel`) importing any other package of ours;
- a part (`workloads`, `nemesis`, `results`) importing anything of ours but `kernel`;
- the orchestrator (every module of `harness/` but the registry, the DB adapters, the systems under
  test, the node image and the benchmarks: `run`, `phases`, `pool`, `sim_search`, `nightly`,
  `detect`, `provision.*`, the CLIs, ...) importing a concrete workload, DB adapter, system, fault
  family or checker — those arrive through `harness.registry` or the `Test` record (a system's
  declaration and paths are data, which the simulator's adapter of our broker reads);
- the ground floor naming a system under test (ZooKeeper, logbroker) in any file, in any case;
- any import of `logbroker` outside `cluster-impl/`, and any import of the simulator (`logsim`)
  outside its one adapter, `harness/provision/sim.py` (and `cluster-impl/`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

from docs import layers

ROOT = layers.ROOT
PACKAGES = layers.PACKAGES
PARTS = ("workloads", "nemesis", "results")
ORCHESTRATOR = re.compile(r"^harness\.(?!registry$|db\b|systems\b|image\b|bench\b)[\w.]+$")
SIM_ADAPTER = "harness/provision/sim.py"
CONCRETE = re.compile(
    r"^(workloads\.(?!registry$)\w+|harness\.db\.\w+|harness\.systems\.\w+\.(?!decl$|layout$|settings$)\w+|"
    r"results\.(check|checker)|nemesis\.(?!registry$|runner$)\w+)$"
)


MODULES = layers.our_modules()
EDGES = layers.module_edges(MODULES)
_imports = layers.imports_of


def _unit(mod: str) -> str:
    """harness/'s modules and subpackages are units of their own; other packages are one unit each."""
    parts = mod.split(".")
    if parts[0] == "harness" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def test_no_cycle_between_top_level_packages() -> None:
    g = nx.DiGraph((a.split(".")[0], b.split(".")[0]) for a, b in EDGES if a.split(".")[0] != b.split(".")[0])
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"packages import each other: {cycles}"


def test_no_cycle_inside_harness() -> None:
    g = nx.DiGraph((_unit(a), _unit(b)) for a, b in EDGES
                   if a.startswith("harness.") and b.startswith("harness.") and _unit(a) != _unit(b))
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"harness modules import each other: {cycles}"


def test_the_ground_floor_imports_nothing_of_ours() -> None:
    bad = [(a, b) for a, b in EDGES if a.startswith("kernel") and not b.startswith("kernel")]
    assert not bad, f"kernel must import nothing above it: {bad}"


def test_parts_import_only_the_ground_floor() -> None:
    bad = [(a, b) for a, b in EDGES
           if a.split(".")[0] in PARTS and b.split(".")[0] not in ("kernel", a.split(".")[0])]
    assert not bad, f"parts may import kernel only: {bad}"


def test_the_orchestrator_reaches_concrete_parts_only_through_registries() -> None:
    bad = [(a, b) for a, b in EDGES if ORCHESTRATOR.match(a) and CONCRETE.match(b)]
    assert not bad, f"the orchestrator imports a concrete part (use harness.registry / the Test record): {bad}"


def _importers_of(package: str) -> list[str]:
    """Every file outside cluster-impl/ that imports `package` (or a module in it)."""
    out = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("cluster-impl", ".venv", ".build") or "site-packages" in rel.parts:
            continue
        if any(n == package or n.startswith(package + ".") for n in _imports(path)):
            out.append(rel.as_posix())
    return out


def test_nothing_outside_cluster_impl_imports_the_system_under_test() -> None:
    bad = _importers_of("logbroker")
    assert not bad, f"only cluster-impl/ may import logbroker: {bad}"


def test_only_the_simulator_adapter_imports_the_simulator() -> None:
    bad = [f for f in _importers_of("logsim") if f != SIM_ADAPTER]
    assert not bad, f"only {SIM_ADAPTER} may import logsim: {bad}"


def test_every_orchestrator_module_is_held_to_the_registry_rule() -> None:
    """The rule above must see the modules the issue names (not only run/phases/pool)."""
    held = {m for m in MODULES if ORCHESTRATOR.match(m)}
    assert {"harness.run", "harness.phases", "harness.pool", "harness.sim_search", "harness.nightly",
            "harness.detect", "harness.provision.sim", "harness.provision.docker", "harness.run_cli"} <= held
    assert "harness.registry" not in held and "harness.systems.logbroker.db" not in held


def test_the_ground_floor_names_no_system_under_test() -> None:
    """kernel/ says what Kafka's protocol says (leader, epoch, ISR, controller); ZooKeeper and our
    broker live with their system (harness/systems/logbroker/). Every file, comments included."""
    bad = []
    for path in sorted((ROOT / "kernel").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".md", ".toml", ".txt"):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"zoo_?keeper|logbroker|\bzk\b|\bzk_", line, re.IGNORECASE):
                    bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "the ground floor names a system:\n" + "\n".join(bad)


def test_cluster_impl_imports_nothing_of_the_harness() -> None:
    """The system under test is installable on its own: no module of cluster-impl/ (its benchmarks
    included; its tests drive the harness on purpose) imports a package of ours."""
    bad = []
    for path in sorted((ROOT / "cluster-impl").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if "tests" in rel.parts or "build" in rel.parts:
            continue
        for n in _imports(path):
            if n.split(".")[0] in PACKAGES:
                bad.append(f"{rel.as_posix()} imports {n}")
    assert not bad, "\n".join(bad)


def test_the_harness_and_the_broker_agree_on_the_zookeeper_layout() -> None:
    """Both sides spell Kafka's ZooKeeper paths; without importing each other, their constants must agree."""

    def constants(path: Path) -> dict[str, str]:
        out = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out[target.id] = node.value.value
        return out

    ours = constants(ROOT / "harness" / "systems" / "logbroker" / "zk_layout.py")
    theirs = constants(ROOT / "cluster-impl" / "logbroker" / "coord" / "paths.py")
    assert ours, "no constants read"
    for name, value in ours.items():
        assert theirs.get(name) == value, f"{name}: harness says {value!r}, the broker {theirs.get(name)!r}"


def test_the_checker_is_real() -> None:
    """The test above would pass on an empty graph: make sure it saw the imports it is about."""
    assert ("harness.registry", "workloads.registry") in EDGES
    assert ("nemesis.runner", "kernel.history") in EDGES
    assert any(a == "harness.run" for a, _ in EDGES)
    assert "logsim.cluster" in _imports(ROOT / SIM_ADAPTER)
