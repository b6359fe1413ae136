"""A test is a record of objects, as Jepsen's test map: `Test(spec, provisioner, db, runtime, connect,
workload, nemesis, checker)`. The spec is plain data (what `test.json` holds); the rest are live parts
built from it by the orchestrator's registries. The backend is the provisioner, the DB (with the
fault capabilities it implements), the runtime (`kernel/runtime.py`) and `connect` (how a client
reaches the brokers): containers or the simulator, behind the same seams. `harness.run.run(test)`
only nests the phases over it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kernel.checker import Checker
from kernel.db import DB, Cluster
from kernel.nemesis import Family, PlannedFault
from kernel.node import Node
from kernel.runtime import Runtime
from kernel.spec import RunSpec
from kernel.system import System
from kernel.workload import Connect, Workload


class Provisioner(Protocol):
    """Where nodes come from (docker containers, ssh hosts, the simulator)."""

    kind: str
    cluster: str

    def up(self, n: int) -> list[Node]:
        """Make `n` nodes reachable and return them; on any failure (or a stop signal) leave nothing behind."""
        ...

    def down(self) -> None:
        """Release this cluster's nodes; idempotent."""
        ...

    def leftovers(self) -> int:
        """How many objects of an earlier run under this cluster name exist (0 if none)."""
        ...

    def connect(self, nodes: list[Node]) -> Cluster:
        """Open a connection (Remote) to every node."""
        ...

    def facts(self) -> dict[str, object]:
        """What test.json should record about the nodes' origin (e.g. the image id)."""
        ...


@dataclass(frozen=True)
class NemesisPackage:
    """The faults of a run: the families in use (by name) and the schedule planned from the seed."""

    families: dict[str, Family]
    plan: Callable[[list[str]], list[PlannedFault]]  # node names -> the schedule


@dataclass(frozen=True)
class Test:
    spec: RunSpec
    provisioner: Provisioner
    db: DB
    runtime: Runtime
    connect: Connect
    workload: Workload
    nemesis: NemesisPackage
    checker: Checker
    info: dict[str, Any] | None = None  # extra facts for test.json (image id, versions)
    #: the system under test (`kernel.system.System`): what the phases say it is and deploy
    system: System | None = None
    #: the Kafka features the run needs of the brokers, asked of them (ApiVersions) once they answer
    features: tuple[str, ...] = ()
