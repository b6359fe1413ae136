"""From a `RunSpec` to a `Test`: the one place the orchestrator learns which parts exist.

`preflight(spec)` checks every name a registry owns (system, workload, provisioner, nemesis, bug
switches) and every combination the system or the backend cannot act out, before anything starts,
with one sentence each: a fault kind whose role or capability the system lacks (`kernel.system`),
a workload whose Kafka features it does not serve. `build_test(spec)` assembles the record of live
parts. The system under test (`harness.systems`) gives the DB and its settings; the backend —
provisioner, runtime and the clients' `connect` — is chosen here: containers (docker or ssh hosts)
or the simulator (`harness/provision/sim.py`, our broker only). `run.py`, the worker pool and the
CLIs never import a concrete workload, system, DB adapter, backend or checker: they arrive here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from harness.provision import PROVISIONERS, get_provisioner
from harness.runtime import ThreadRuntime
from harness.systems import get_system, system_name
from kernel.capabilities import Clock, Disk
from kernel.errors import UsageError
from kernel.nemesis import Family, PlannedFault, PlanWorld, kind_needs
from kernel.spec import RunSpec
from kernel.system import System
from kernel.test import NemesisPackage, Test
from kernel.workload import Workload
from nemesis import validate as validate_nemesis
from nemesis.registry import families_needed
from nemesis.registry import perf as nemesis_perf
from nemesis.registry import resolve as resolve_nemesis
from nemesis.schedule import plan as plan_faults
from results.checker import KafkaChecker
from workloads import librdkafka
from workloads.registry import get_workload

#: capabilities only the node image gives a container: an ssh host lacks them
NEEDS_IMAGE: dict[type, str] = {Clock: "libfaketime preloaded by the node image's start-broker",
                                Disk: "the node image's lazyfs, a FUSE file system that can drop unsynced writes"}


def preflight(spec: RunSpec) -> RunSpec:
    """Every registry-owned name in the spec exists, and the system and the backend can act every
    part of it out; or one sentence saying what is wrong. Returns the spec with `all` (and a family
    named whole) expanded into what the system can take."""
    system = get_system(spec.system, spec.system_version)
    # test.json names the system, default or not, and the version a built system was built at (a
    # replay builds that one, whatever the default is by then)
    spec = replace(spec, system=system_name(spec.system),
                   system_version=spec.system_version or getattr(system, "version", ""))
    workload = get_workload(spec.workload)
    validate_nemesis(list(spec.nemesis))
    if spec.provisioner not in PROVISIONERS:
        raise UsageError(f"unknown provisioner {spec.provisioner!r}; choose one of: {', '.join(PROVISIONERS)}")
    if spec.provisioner not in system.backends:
        raise UsageError(f"system {system.name} runs on the {', '.join(system.backends)} provisioner(s), not "
                         f"{spec.provisioner} (the simulator runs our own broker only)")
    if spec.provisioner == "sim":
        if spec.txn_mode == "ctp":
            raise UsageError("--txn-mode ctp runs on containers only: the simulated transactional client has no "
                             "TxnOffsetCommit yet; use --txn-mode plain with --provisioner sim")
        if spec.leave_running:
            raise UsageError("--leave-running needs containers: a simulated cluster ends with its run")
    elif spec.check_determinism:
        raise UsageError("--check-determinism needs --provisioner sim (a container run cannot be repeated exactly)")
    if spec.bugs and "bug-switches" not in system.decl.extras:
        raise UsageError(f"system {system.name} has no bug switches (--bug {spec.bugs[0]}); a process system turns "
                         "its own on through its file's [env] table")
    system.preflight(spec)
    for feature in features_needed(spec, workload):
        if feature not in system.decl.features:
            raise UsageError(f"system {system.name} does not serve {feature}, which the {spec.workload} workload "
                             f"with these settings needs{_feature_hint(feature)}")
    db = _db(spec, system)
    # every kind left is one the system and the backend can act out: `resolve` refused or left out the rest
    return replace(spec, nemesis=resolve_nemesis(spec.nemesis, refusal(spec, system, db)))


def _feature_hint(feature: str) -> str:
    return {"transactions": " (leave out --txn / --workload txn)",
            "consumer-groups": " (use --sub-via assign)",
            "idempotence": " (add --no-idempotence)"}.get(feature, "")


def features_needed(spec: RunSpec, workload: Workload) -> tuple[str, ...]:
    """The Kafka features a run needs of the brokers: what its workload names, plus consumer groups
    when consumers subscribe and idempotence when producers are idempotent."""
    out = list(workload.features)
    if workload.transactional is not None and "transactions" not in out:
        out.append("transactions")
    if "subscribe" in spec.sub_via and "consumer-groups" not in out:
        out.append("consumer-groups")
    if spec.idempotence and "idempotence" not in out:
        out.append("idempotence")
    return tuple(out)


def refusal(spec: RunSpec, system: System, db: Any) -> Any:
    """Why one fault kind cannot be acted out by this system on this backend (None: it can)."""
    def why(fam: Family, kind: str) -> str | None:
        for cap in fam.needs:
            if not isinstance(db, cap):
                return (f"the {spec.provisioner} backend cannot act out nemesis {fam.name!r}: it has no "
                        f"{cap.__name__} capability; leave it out of --nemesis")
            if spec.provisioner == "ssh" and cap in NEEDS_IMAGE:
                return (f"nemesis {fam.name!r} needs {NEEDS_IMAGE[cap]}, which the 'ssh' provisioner's "
                        "hosts do not have; use --provisioner docker")
        missing = system.decl.missing(kind_needs(fam, kind))
        if missing is not None:
            return (f"system {system.name} cannot act out nemesis {fam.name}-{kind}: it has no "
                    f"{missing.describe().removeprefix('a ')}; leave it out of --nemesis "
                    f"(`chaos nemeses --system {spec.system}` lists what it can take)")
        # a fault draws its victims from the brokers' nodes: one aimed at a role that lives elsewhere
        # (a store placed on the first node beside brokers on the rest) would hit nothing
        names = [f"n{i + 1}" for i in range(spec.nodes)]
        brokers = system.decl.hosts("broker", names)
        for need in kind_needs(fam, kind):
            if system.decl.hosts(need.role, names) != brokers:
                return (f"system {system.name} runs its {need.role} processes on other nodes than its brokers, "
                        f"and nemesis {fam.name}-{kind} draws its victims from the brokers' nodes; leave it out "
                        "of --nemesis")
        return None

    return why


def kind_refusals(system_name: str, provisioner: str = "docker") -> dict[str, str]:
    """`family-kind` -> why the system cannot take it on this backend, for every kind it cannot take
    (`chaos nemeses --system`)."""
    from nemesis.registry import FAMILIES

    system = get_system(system_name)
    spec = replace(RunSpec(), system=system_name, provisioner=provisioner)
    why = refusal(spec, system, _db(spec, system))
    out = {}
    for name, make in FAMILIES.items():
        fam = make()
        for kind in fam.kinds:
            if (reason := why(fam, kind)) is not None:
                out[f"{name}-{kind}"] = reason
    return out


def judge_many(run_dirs: list[Path], spark_master: str | None = None) -> list[Any]:
    """The real checks over many stored runs as one Spark job, writing nothing: per run a result with
    `valid`, `bad_error_types`, `anomalies` and `warnings`, or the error that kept it from a verdict
    (`chaos sim-search`'s batches)."""
    from results.check import check_runs

    return list(check_runs(run_dirs, spark_master=spark_master, write=False, perf=False))


def bug_switches(system: str = "logbroker") -> tuple[str, ...]:
    """The system under test's bug switches (ours: asked of the broker program itself)."""
    return get_system(system).bug_switches()


def _db(spec: RunSpec, system: System | None = None) -> Any:
    """The backend's DB (a value until `setup`: nothing is made yet)."""
    if spec.provisioner == "sim":
        from harness.provision.sim import SimDB

        return SimDB(spec)
    return make_db(spec, system)


def make_db(spec: RunSpec, system: System | None = None) -> Any:
    """The system's container deployment for `spec` (`chaos heal` and the tests attach it to nodes)."""
    return (system or get_system(spec.system, spec.system_version)).make_db(spec)


def _schedule(spec: RunSpec, system: System, node_names: list[str]) -> list[PlannedFault]:
    t = system.timeouts(spec)  # the timeouts the system deploys (its settings record)
    brokers = system.decl.hosts("broker", node_names) or node_names  # a broker fault hits a broker's node
    world = PlanWorld(brokers, spec.partitions, spec.replication_factor, session_timeout_s=t.session_s,
                      replica_lag_s=t.replica_lag_s)
    return plan_faults(spec.seed, list(spec.nemesis), interval_s=spec.nemesis_interval,
                       time_limit_s=spec.time_limit, world=world, max_active=spec.max_active)


def system_facts(system: System) -> dict[str, Any]:
    """What test.json says of the system under test: its name, processes (roles, capabilities) and
    extras, so a check knows which of its parts the system could give input for."""
    return {"name": system.name, "extras": sorted(system.decl.extras),
            "processes": [{"name": p.name, "roles": list(p.roles), "ports": list(p.ports),
                           "capabilities": sorted(p.capabilities)} for p in system.decl.processes]}


def system_image(system: System) -> str | None:
    """The node image a system's containers run: a user's own (a process file's `image`), the node image
    plus the system's layer (built here, once per machine: `make tansu` does it ahead), or None for
    the harness's node image. A build that fails is one sentence (exit 6 for cargo, 4 for docker)."""
    if (layer := getattr(system, "image_layer", None)) is not None:
        from harness.image.layer import ensure_layer

        return ensure_layer(layer)
    image: str | None = getattr(system, "image", None)
    return image


def build_test(spec: RunSpec, *, spark_master: str | None = None, elle_cli: str | None = None) -> Test:
    spec = preflight(spec)
    system = get_system(spec.system, spec.system_version)
    opts: dict[str, object] = {"hosts": spec.hosts} if spec.provisioner == "ssh" else {}
    if spec.provisioner == "docker" and (image := system_image(system)):
        opts["image"] = image
    db = _db(spec, system)
    provisioner = get_provisioner(spec.provisioner, spec.cluster, **opts)
    if spec.provisioner == "sim":
        runtime, connect = db.runtime, db.connect
    else:
        runtime, connect = ThreadRuntime(), librdkafka.connect
        if (txn := get_workload(spec.workload).transactional) is not None:
            from workloads import librdkafka_txn

            connect = librdkafka_txn.connect_with(txn)
    return Test(
        spec=spec,
        provisioner=provisioner,
        db=db,
        runtime=runtime,
        connect=connect,
        workload=get_workload(spec.workload),
        nemesis=NemesisPackage(families_needed(list(spec.nemesis)), partial(_schedule, spec, system)),
        checker=KafkaChecker(spark_master, elle_cli),
        info={"nemesis_perf": {k: v.to_json() for k, v in nemesis_perf().items()}, "system": system_facts(system)},
        system=system,
        features=features_needed(spec, get_workload(spec.workload)),
    )
