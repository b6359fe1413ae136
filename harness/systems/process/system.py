"""`ProcessSystem`: a system under test described by a TOML file (`--system process:FILE.toml`).

Its declaration is read from the file: each process's roles, ports and the capabilities the file
claims for it (`kill`, `pause`, `clock`, `lose-unfsynced`, `disk-loss`, `net`), so a fault kind
whose role or capability the file does not give is refused before anything starts. It gives none
of our broker's extras (replica dumps, coverage probes, bug switches, reassignment): the checks
that need them say `unknown` for their part, and the report says what was not checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.systems.process.config import ProcessSystemConfig, load
from kernel.spec import RunSpec
from kernel.system import Process, SystemDecl, Timeouts


def declare(config: ProcessSystemConfig) -> SystemDecl:
    procs = tuple(Process(p.name, p.roles, p.ports, frozenset(p.capabilities), p.data_dirs, p.log_files,
                          p.nodes) for p in config.processes)
    return SystemDecl(config.name, procs, frozenset(config.features))


class ProcessSystem:
    backends: tuple[str, ...] = ("docker", "ssh")

    def __init__(self, config: ProcessSystemConfig) -> None:
        self.config = config
        self.name = config.name
        self.decl = declare(config)

    @classmethod
    def load(cls, path: Path) -> ProcessSystem:
        return cls(load(path))

    @property
    def image(self) -> str | None:
        """The node image the file names (built FROM the harness's node image), or None for ours."""
        return self.config.image

    def timeouts(self, spec: RunSpec) -> Timeouts:
        return Timeouts(self.config.session_timeout_ms / 1000, self.config.replica_lag_ms / 1000)

    def preflight(self, spec: RunSpec) -> None:
        return None

    def make_db(self, spec: RunSpec) -> Any:
        from harness.systems.process.db import ProcessDB

        return ProcessDB(self.config, self.decl, spec)

    def deploy_line(self, spec: RunSpec) -> str:
        return f"starting {self.name} ({', '.join(p.name for p in self.config.processes)})"

    def bug_switches(self) -> tuple[str, ...]:
        return ()
