"""From a `RunSpec` to a `Test`: the one place the orchestrator learns which parts exist.

`preflight(spec)` checks every name a registry owns (workload, provisioner, nemesis, bug switches)
and every combination a backend cannot act out, before anything starts, with one sentence each;
`build_test(spec)` assembles the record of live parts. The backend — provisioner, DB (with the fault
capabilities it implements), runtime and the clients' `connect` — is chosen here: containers (docker
or ssh hosts) or the simulator (`harness/provision/sim.py`). `run.py`, the worker pool and the CLIs
never import a concrete workload, DB adapter, backend or checker: they arrive here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from harness.db.logbroker import LogbrokerDB, check_bugs, known_bugs
from harness.db.settings import BrokerSettings
from harness.provision import PROVISIONERS, get_provisioner
from harness.runtime import ThreadRuntime
from kernel.capabilities import Clock, Disk
from kernel.errors import UsageError
from kernel.nemesis import PlannedFault, PlanWorld
from kernel.spec import RunSpec
from kernel.test import NemesisPackage, Test
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
    """Every registry-owned name in the spec exists, and the backend can act every part of it out;
    or one sentence saying what is wrong. Returns the spec with `all` expanded into its families."""
    get_workload(spec.workload)
    validate_nemesis(list(spec.nemesis))
    spec = replace(spec, nemesis=resolve_nemesis(spec.nemesis))
    if spec.provisioner not in PROVISIONERS:
        raise UsageError(f"unknown provisioner {spec.provisioner!r}; choose one of: {', '.join(PROVISIONERS)}")
    if spec.provisioner == "sim":
        if spec.txn_mode == "ctp":
            raise UsageError("--txn-mode ctp runs on containers only: the simulated transactional client has no "
                             "TxnOffsetCommit yet; use --txn-mode plain with --provisioner sim")
        if spec.leave_running:
            raise UsageError("--leave-running needs containers: a simulated cluster ends with its run")
    elif spec.check_determinism:
        raise UsageError("--check-determinism needs --provisioner sim (a container run cannot be repeated exactly)")
    check_bugs(spec.bugs)
    check_capabilities(spec, _db(spec))
    return spec


def check_capabilities(spec: RunSpec, db: Any) -> None:
    """A family whose capabilities the backend lacks is refused before anything starts (never
    recorded as started and stopped without happening)."""
    for fam in families_needed(list(spec.nemesis)).values():
        for cap in fam.needs:
            if not isinstance(db, cap):
                raise UsageError(f"the {spec.provisioner} backend cannot act out nemesis {fam.name!r}: it has no "
                                 f"{cap.__name__} capability; leave it out of --nemesis")
            if spec.provisioner == "ssh" and cap in NEEDS_IMAGE:
                raise UsageError(f"nemesis {fam.name!r} needs {NEEDS_IMAGE[cap]}, which the 'ssh' provisioner's "
                                 "hosts do not have; use --provisioner docker")


def judge_many(run_dirs: list[Path], spark_master: str | None = None) -> list[Any]:
    """The real checks over many stored runs as one Spark job, writing nothing: per run a result with
    `valid`, `bad_error_types`, `anomalies` and `warnings`, or the error that kept it from a verdict
    (`chaos sim-search`'s batches)."""
    from results.check import check_runs

    return list(check_runs(run_dirs, spark_master=spark_master, write=False, perf=False))


def bug_switches() -> tuple[str, ...]:
    """The system under test's bug switches (asked of the broker program itself)."""
    return known_bugs()


def _db(spec: RunSpec) -> Any:
    """The backend's DB (a value until `setup`: nothing is made yet)."""
    if spec.provisioner == "sim":
        from harness.provision.sim import SimDB

        return SimDB(spec)
    return make_db(spec)


def make_db(spec: RunSpec) -> LogbrokerDB:
    return LogbrokerDB(BrokerSettings(replication_factor=spec.replication_factor,
                                      min_insync_replicas=spec.min_insync, bugs=tuple(spec.bugs),
                                      partitions=spec.partitions, flush_messages=1, extra=dict(spec.extra)))


def _schedule(spec: RunSpec, node_names: list[str]) -> list[PlannedFault]:
    settings = BrokerSettings()  # the timeouts both backends deploy (harness/db/settings.py)
    world = PlanWorld(node_names, spec.partitions, spec.replication_factor,
                      session_timeout_s=settings.session_timeout_ms / 1000,
                      replica_lag_s=settings.replica_lag_time_max_ms / 1000)
    return plan_faults(spec.seed, list(spec.nemesis), interval_s=spec.nemesis_interval,
                       time_limit_s=spec.time_limit, world=world, max_active=spec.max_active)


def build_test(spec: RunSpec, *, spark_master: str | None = None, elle_cli: str | None = None) -> Test:
    spec = preflight(spec)
    opts: dict[str, object] = {"hosts": spec.hosts} if spec.provisioner == "ssh" else {}
    db = _db(spec)
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
        nemesis=NemesisPackage(families_needed(list(spec.nemesis)), partial(_schedule, spec)),
        checker=KafkaChecker(spark_master, elle_cli),
        info={"nemesis_perf": {k: v.to_json() for k, v in nemesis_perf().items()}},
    )
