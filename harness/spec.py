"""`RunSpec`: everything that defines a run, frozen — exactly what `test.json` holds under "config".

Built from defaults, then a TOML `--config` file, then command-line flags (flags win). Unknown keys
and impossible values are a `UsageError` with one sentence, before anything starts.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.errors import UsageError


@dataclass(frozen=True, slots=True)
class RunSpec:
    name: str = "queue"
    workload: str = "queue"
    nodes: int = 5
    nemesis: tuple[str, ...] = ("partition", "kill")
    nemesis_interval: float = 10.0
    time_limit: float = 60.0
    concurrency: int = 6
    rate: float = 50.0
    seed: int = 0
    acks: str = "all"
    idempotence: bool = True
    replication_factor: int = 3
    min_insync: int = 2
    partitions: int = 3
    bugs: tuple[str, ...] = ()
    provisioner: str = "docker"
    hosts: str | None = None
    store: str = "store"
    topic: str = "chaos"
    recovery_timeout: float = 30.0
    leave_running: bool = False
    cluster: str = "chaos"
    extra: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["nemesis"] = list(self.nemesis)
        d["bugs"] = list(self.bugs)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunSpec:
        return build_spec(d)

    def validate(self) -> RunSpec:
        if self.nodes < 1:
            raise UsageError(f"--nodes must be at least 1, not {self.nodes}")
        if self.time_limit <= 0:
            raise UsageError(f"--time-limit must be positive, not {self.time_limit}")
        if self.concurrency < 1:
            raise UsageError(f"--concurrency must be at least 1, not {self.concurrency}")
        if self.rate <= 0:
            raise UsageError(f"--rate must be positive, not {self.rate}")
        if self.acks not in ("all", "1", "0", "-1"):
            raise UsageError(f"--acks must be all, 1 or 0, not {self.acks!r}")
        if not 1 <= self.replication_factor <= self.nodes:
            raise UsageError(f"--replication-factor {self.replication_factor} needs 1..{self.nodes} nodes")
        if not 1 <= self.min_insync <= self.replication_factor:
            raise UsageError(f"--min-insync must be between 1 and the replication factor, not {self.min_insync}")
        if self.partitions < 1:
            raise UsageError(f"--partitions must be at least 1, not {self.partitions}")
        if self.nemesis_interval <= 0:
            raise UsageError(f"--nemesis-interval must be positive, not {self.nemesis_interval}")
        return self


FIELDS = {f.name for f in fields(RunSpec)}


def build_spec(values: dict[str, Any], base: RunSpec | None = None) -> RunSpec:
    unknown = sorted(set(values) - FIELDS)
    if unknown:
        raise UsageError(f"unknown run setting(s): {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}")
    clean = dict(values)
    for k in ("nemesis", "bugs"):
        if k in clean and clean[k] is not None:
            v = clean[k]
            clean[k] = tuple(x for x in (v.split(",") if isinstance(v, str) else v) if x)
    try:
        return replace(base or RunSpec(), **clean)
    except TypeError as e:
        raise UsageError(f"bad run setting: {e}") from None


def load_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"config file {path} is not valid TOML: {e}") from None
    return {k.replace("-", "_"): v for k, v in data.items()}
