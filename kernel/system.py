"""A system under test, as data the harness reads: its processes, their roles, ports and capabilities.

Jepsen's DB has two methods; what a fault may hit comes from the DB (`db/primaries`), and a fault
kind is drawn only from what the DB supports (`satisfies?`). Here a system declares, once, which
processes run on a node, which *roles* each plays (Kafka's own words: `broker`, `controller`,
`coordinator`; and `metadata-store`, `storage` for what a broker keeps its state in) and which
*capabilities* the harness has over each (`kill`, `pause`, `clock`, `lose-unfsynced`, `disk-loss`,
`net`: cut off from its peers, `client-net`: cut off from the clients). A fault kind names the
(role, capability) pairs it needs (`Need`), and a kind the chosen system cannot act out is refused
before anything starts, naming the system and what it lacks.

This module names no system: the declarations live with each system (`harness/systems/`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kernel.errors import UsageError

if TYPE_CHECKING:
    from kernel.db import DB
    from kernel.spec import RunSpec

#: the roles a process may play; a fault or a workload names these, never a program
ROLES = ("broker", "controller", "coordinator", "metadata-store", "storage")
#: which of a run's nodes run a process (node order): every one, the first, or all but the first
PLACEMENTS = ("all", "first", "rest")
#: what the harness can do to a process
CAPABILITIES = ("kill", "pause", "clock", "lose-unfsynced", "disk-loss", "net", "client-net")
#: how a refusal says each capability
VERBS = {"kill": "kill", "pause": "pause", "clock": "skew the clock of", "lose-unfsynced":
         "crash losing its unfsynced writes", "disk-loss": "wipe the disk of", "net": "cut off from its peers",
         "client-net": "cut off from the clients"}
#: the Kafka features a workload may need, each with the API keys a broker must advertise for it
#: (ApiVersions): transactions need EndTxn (26), consumer groups JoinGroup (11) and OffsetCommit (8),
#: idempotence InitProducerId (22)
FEATURES: dict[str, tuple[int, ...]] = {
    "transactions": (22, 24, 25, 26, 28),
    "consumer-groups": (8, 9, 10, 11, 12, 13, 14),
    "idempotence": (22,),
}
#: Kafka's names for those API keys, for the sentence that refuses a workload
API_NAMES = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
             13: "LeaveGroup", 14: "SyncGroup", 22: "InitProducerId", 24: "AddPartitionsToTxn",
             25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit"}


@dataclass(frozen=True, slots=True)
class Need:
    """What one fault kind needs of the system: a process in `role` the harness can `capability`."""

    role: str
    capability: str

    def describe(self) -> str:
        """"a metadata-store process the harness can cut off": what the refusal says is missing."""
        return f"a {self.role} process the harness can {VERBS[self.capability]}"


@dataclass(frozen=True, slots=True)
class Process:
    """One program on each node: its name (the pid file's and the logs'), the roles it plays, the
    ports it listens on (the first serves clients or peers), and what the harness can do to it."""

    name: str
    roles: tuple[str, ...]
    ports: tuple[int, ...] = ()
    capabilities: frozenset[str] = frozenset()
    data_dirs: tuple[str, ...] = ()
    log_files: tuple[str, ...] = ()
    #: which nodes run it: `all`, `first` (one store or one broker for the whole cluster), or `rest`
    #: (every node but the first, beside a process placed `first`)
    placement: str = "all"

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"process {self.name}: unknown placement {self.placement!r} ({', '.join(PLACEMENTS)})")
        for r in self.roles:
            if r not in ROLES:
                raise ValueError(f"process {self.name}: unknown role {r!r} (roles: {', '.join(ROLES)})")
        for c in self.capabilities:
            if c not in CAPABILITIES:
                raise ValueError(f"process {self.name}: unknown capability {c!r} ({', '.join(CAPABILITIES)})")


@dataclass(frozen=True, slots=True)
class SystemDecl:
    """A system's processes (the same set on every node) and the Kafka features it serves."""

    name: str
    processes: tuple[Process, ...]
    features: frozenset[str] = field(default_factory=lambda: frozenset(FEATURES))
    #: what the system gives beyond the Kafka protocol: `replica-dumps`, `coverage`, `bug-switches`,
    #: `admin` (reassignment, preferred election), `registrations` (restarts confirmed in its store)
    extras: frozenset[str] = frozenset()
    #: (label, command) pairs `chaos cluster health` runs on every node: what this system needs there
    health: tuple[tuple[str, str], ...] = ()

    def with_role(self, role: str) -> list[Process]:
        return [p for p in self.processes if role in p.roles]

    def process(self, role: str) -> Process | None:
        """The first process playing `role` (None: the system has no such role)."""
        found = self.with_role(role)
        return found[0] if found else None

    def ports(self, role: str) -> tuple[int, ...]:
        """Every port of the processes playing `role` (what a cut of that role drops)."""
        out: list[int] = []
        for p in self.with_role(role):
            out.extend(x for x in p.ports if x not in out)
        return tuple(out)

    def port(self, role: str) -> int:
        """The first port of `role`'s first process (the broker's client port)."""
        ports = self.ports(role)
        if not ports:
            raise LookupError(f"system {self.name} declares no port for role {role}")
        return ports[0]

    def can(self, need: Need) -> bool:
        return any(need.capability in p.capabilities for p in self.with_role(need.role))

    def missing(self, needs: Iterable[Need]) -> Need | None:
        """The first of `needs` this system cannot act out (None: all of them)."""
        return next((n for n in needs if not self.can(n)), None)

    def hosts(self, role: str, nodes: list[str]) -> list[str]:
        """The names among `nodes` (a run's, in order) where some process playing `role` runs: what a
        fault aimed at that role may hit, and where clients of a broker connect."""
        return [n for i, n in enumerate(nodes) if any(placed(p.placement, i) for p in self.with_role(role))]

    def pausable(self) -> list[str]:
        """The names of every process the harness can pause (what a pause heal resumes)."""
        return [p.name for p in self.processes if "pause" in p.capabilities]


def placed(placement: str, index: int) -> bool:
    """Whether a process placed `placement` runs on the run's node number `index` (0-based)."""
    return placement == "all" or (placement == "first") == (index == 0)


def missing_apis(feature: str, advertised: Iterable[int]) -> list[str]:
    """The Kafka APIs of `feature` a broker that advertises `advertised` lacks, by Kafka's names."""
    have = set(advertised)
    return [API_NAMES.get(k, str(k)) for k in FEATURES[feature] if k not in have]


@dataclass(frozen=True, slots=True)
class ImageLayer:
    """What a system adds to the harness's node image for the docker backend, as data: files from
    this machine copied in (path in the image -> path here), then one shell command run in the
    build. `key` names the contents (version, features, the files' digests): a layer is built once
    per machine and key (`harness/image/layer.py`), and a system builds its files before it says
    this (a binary from its registry)."""

    name: str
    key: str
    files: tuple[tuple[str, str], ...]
    run: str = "true"


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The system's timeouts that fault compositions must outlast, from its one settings record (so a
    session timeout set through the run's settings is the one the fault plan uses too)."""

    session_s: float = 6.0
    replica_lag_s: float = 10.0


class System(Protocol):
    """A system under test as a part (Jepsen's DB, plus what the harness reads as data): its
    declaration, the backends it runs on, its settings record, its deployment, and its extras."""

    name: str
    decl: SystemDecl
    #: the provisioners it can be deployed by ("docker", "ssh", "sim")
    backends: tuple[str, ...]

    def timeouts(self, spec: RunSpec) -> Timeouts:
        """Its session and replica-lag timeouts for this run (what the deployment configures)."""
        ...

    def preflight(self, spec: RunSpec) -> None:
        """Refuse, in one sentence, a setting this system cannot honour (an unknown bug switch)."""
        ...

    def make_db(self, spec: RunSpec) -> DB:
        """Its deployment for this run (a value until `setup`: nothing is made yet)."""
        ...

    def deploy_line(self, spec: RunSpec) -> str:
        """What `chaos run` says as the deployment starts ("starting the brokers")."""
        ...

    def bug_switches(self) -> tuple[str, ...]:
        """Its named bug switches (empty for a system that has none)."""
        ...


def check_features(system: str, features: Iterable[str], advertised: Iterable[int]) -> None:
    """Raise a `UsageError` naming the first feature whose APIs a broker does not advertise."""
    keys = set(advertised)
    for feature in features:
        if missing := missing_apis(feature, keys):
            raise UsageError(f"system {system} cannot serve this workload: it needs {feature}, and its brokers do "
                             f"not advertise {', '.join(missing)} (ApiVersions)")
