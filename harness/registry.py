"""From a `RunSpec` to a `Test`: the one place the orchestrator learns which parts exist.

`preflight(spec)` checks every name a registry owns (workload, provisioner, nemesis, bug switches)
before anything starts; `build_test(spec)` assembles the record of live parts. `run.py`, the worker
pool and the CLIs never import a concrete workload, DB adapter or checker: they arrive here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from harness.db.logbroker import LogbrokerDB, check_bugs, known_bugs
from harness.db.settings import BrokerSettings
from harness.provision import PROVISIONERS, get_provisioner
from kernel.errors import UsageError
from kernel.nemesis import PlannedFault, PlanWorld
from kernel.spec import DEFAULT_NEMESIS, RunSpec
from kernel.test import NemesisPackage, Test
from nemesis import validate as validate_nemesis
from nemesis.registry import families_needed
from nemesis.registry import perf as nemesis_perf
from nemesis.schedule import plan as plan_faults
from results.checker import KafkaChecker
from workloads.registry import get_workload


def preflight(spec: RunSpec) -> RunSpec:
    """Every registry-owned name in the spec exists, or one sentence saying which does not."""
    get_workload(spec.workload)
    if spec.provisioner not in PROVISIONERS:
        raise UsageError(f"unknown provisioner {spec.provisioner!r}; choose one of: {', '.join(PROVISIONERS)}")
    validate_nemesis(list(spec.nemesis), provisioner=spec.provisioner)
    if spec.provisioner == "sim":
        from harness.provision.sim_nemesis import check_supported

        check_supported(list(spec.nemesis))
    elif spec.check_determinism:
        raise UsageError("--check-determinism needs --provisioner sim (a container run cannot be repeated exactly)")
    check_bugs(spec.bugs)
    return spec


def bug_switches() -> tuple[str, ...]:
    """The system under test's bug switches (asked of the broker program itself)."""
    return known_bugs()


def make_db(spec: RunSpec) -> LogbrokerDB:
    return LogbrokerDB(BrokerSettings(replication_factor=spec.replication_factor,
                                      min_insync_replicas=spec.min_insync, bugs=tuple(spec.bugs),
                                      partitions=spec.partitions, extra=dict(spec.extra)))


def _schedule(spec: RunSpec, settings: BrokerSettings, node_names: list[str]) -> list[PlannedFault]:
    world = PlanWorld(node_names, spec.partitions, spec.replication_factor,
                      session_timeout_s=settings.session_timeout_ms / 1000,
                      replica_lag_s=settings.replica_lag_time_max_ms / 1000)
    return plan_faults(spec.seed, list(spec.nemesis), interval_s=spec.nemesis_interval,
                       time_limit_s=spec.time_limit, world=world, max_active=spec.max_active)


def build_test(spec: RunSpec, *, spark_master: str | None = None, elle_cli: str | None = None) -> Test:
    if spec.provisioner == "sim" and spec.nemesis == DEFAULT_NEMESIS:
        from harness.provision.sim_nemesis import SUPPORTED

        spec = replace(spec, nemesis=SUPPORTED)  # the default mix: every family the simulator acts out
    preflight(spec)
    opts: dict[str, object] = {"hosts": spec.hosts} if spec.provisioner == "ssh" else {}
    db = make_db(spec)
    return Test(
        spec=spec,
        provisioner=get_provisioner(spec.provisioner, spec.cluster, **opts),
        db=db,
        workload=get_workload(spec.workload),
        nemesis=NemesisPackage(families_needed(list(spec.nemesis)), partial(_schedule, spec, db.settings)),
        checker=KafkaChecker(spark_master, elle_cli),
        info={"nemesis_perf": {k: v.to_json() for k, v in nemesis_perf().items()}},
    )
