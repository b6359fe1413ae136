"""`LogbrokerSystem`: our broker as the first system under test, on containers, ssh hosts or the simulator."""

from __future__ import annotations

from typing import Any

from harness.systems.logbroker.decl import DECL
from harness.systems.logbroker.settings import settings_for
from kernel.spec import RunSpec
from kernel.system import SystemDecl, Timeouts


class LogbrokerSystem:
    name = "logbroker"
    decl: SystemDecl = DECL
    backends: tuple[str, ...] = ("docker", "ssh", "sim")

    def timeouts(self, spec: RunSpec) -> Timeouts:
        s = settings_for(spec)
        return Timeouts(s.session_timeout_ms / 1000, s.replica_lag_time_max_ms / 1000)

    def preflight(self, spec: RunSpec) -> None:
        from harness.systems.logbroker.db import check_bugs

        settings_for(spec)  # a malformed timeout in `extra` is refused here, before anything starts
        check_bugs(spec.bugs)

    def make_db(self, spec: RunSpec) -> Any:
        """The container (docker or ssh) deployment; the simulator's is `harness.provision.sim.SimDB`,
        which the registry picks for `--provisioner sim` (the simulator runs this broker only)."""
        from harness.systems.logbroker.db import LogbrokerDB

        return LogbrokerDB(settings_for(spec))

    def deploy_line(self, spec: RunSpec) -> str:
        return "starting ZooKeeper and the brokers"

    def bug_switches(self) -> tuple[str, ...]:
        from harness.systems.logbroker.db import known_bugs

        return known_bugs()
