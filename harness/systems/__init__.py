"""Systems under test, one folder each (`kernel.system.System`): which one a run tests is the spec's
`system` field (`--system`, TOML `system`, saved in test.json).

- `logbroker` (the default): our broker, `cluster-impl/`, on containers, ssh hosts or the simulator;
- `tansu`: Tansu 0.6.0 (crates.io), a Kafka-protocol broker nobody here wrote, built with cargo (`tansu/`);
- `process:FILE.toml`: any Kafka-protocol broker described by a TOML file (`process/`): its
  install/start/stop commands, ports, data directories, logs and pid files.

`get_system(name)` is the one way the orchestrator (through `harness.registry`) gets a system.
"""

from __future__ import annotations

from pathlib import Path

from kernel.errors import UsageError
from kernel.system import System

DEFAULT = "logbroker"
PROCESS_PREFIX = "process:"
NAMES = ("logbroker", "tansu", "process:FILE.toml")


def system_name(name: str) -> str:
    """The name test.json saves: the spec's, or the default when it names none; a process system's
    file by its absolute path, so `chaos replay` finds it from any directory."""
    if name.startswith(PROCESS_PREFIX):
        return PROCESS_PREFIX + str(Path(name[len(PROCESS_PREFIX):]).expanduser().resolve())
    return name or DEFAULT


def get_system(name: str, version: str = "") -> System:
    """The system `name` names ("" for the default), or one sentence saying which names there are;
    `version` is the release to build, for a system built from its registry (tansu)."""
    name = system_name(name)
    if name == "tansu":
        from harness.systems.tansu.system import TansuSystem

        return TansuSystem(version)
    if version:
        raise UsageError(f"--system-version is for a system built from its registry (tansu), not {name}")
    if name == "logbroker":
        from harness.systems.logbroker.system import LogbrokerSystem

        return LogbrokerSystem()
    if name.startswith(PROCESS_PREFIX):
        from harness.systems.process.system import ProcessSystem

        return ProcessSystem.load(Path(name[len(PROCESS_PREFIX):]))
    raise UsageError(f"unknown system {name!r}; choose one of: {', '.join(NAMES)}")
