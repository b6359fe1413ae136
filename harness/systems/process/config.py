"""A process system's file: any Kafka-protocol broker, described in TOML for `--system process:FILE.toml`.

The file says what the harness needs to deploy and fault the broker, as data: the commands that
install, configure, start and stop each process, its ports, data directories, log files, pid file
and environment, the roles each process plays and what the harness may do to it. `load(path)`
checks every key against the schema below and refuses a missing, unknown or mistyped one in one
sentence naming the file and the line (exit 3), before anything starts.

Every command runs on each node through its `Remote` (`sh -c`), with the node's facts in its
environment: CHAOS_NODE (n1), CHAOS_NODE_ID (1), CHAOS_NODE_IP, CHAOS_NODE_IPS (every node's
address, space-separated, in node order), CHAOS_NODE_COUNT, CHAOS_FAKETIME_RUN (wraps a command in
the node's libfaketime), CHAOS_PARTITIONS, CHAOS_REPLICATION_FACTOR, CHAOS_MIN_INSYNC, then the
file's `[env]` and the process's own `env`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel.errors import UsageError
from kernel.spec import load_toml
from kernel.system import CAPABILITIES, FEATURES, PLACEMENTS, ROLES

#: key -> (type name, required); the schema a file is checked against
TOP_KEYS: dict[str, tuple[str, bool]] = {
    "name": ("str", True), "version": ("str", False), "image": ("str", False), "features": ("list[str]", False),
    "install": ("list[str]", False), "session_timeout_ms": ("int", False), "replica_lag_ms": ("int", False),
    "env": ("table", False), "process": ("list[table]", True), "client_port": ("int", False),
    "brokers_listed": ("int", False),
}
PROCESS_KEYS: dict[str, tuple[str, bool]] = {
    "name": ("str", True), "roles": ("list[str]", True), "ports": ("list[int]", False),
    "capabilities": ("list[str]", False), "pid_file": ("str", True), "start": ("str", True),
    "stop": ("str", False), "configure": ("list[str]", False), "ready": ("str", False),
    "data_dirs": ("list[str]", False), "disk": ("str", False), "log_files": ("list[str]", False),
    "env": ("table", False), "start_timeout_s": ("int", False), "nodes": ("str", False),
}
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


@dataclass(frozen=True, slots=True)
class ProcessConfig:
    """One `[[process]]` table."""

    name: str
    roles: tuple[str, ...]
    pid_file: str
    start: str
    ports: tuple[int, ...] = ()
    capabilities: tuple[str, ...] = ()
    stop: str | None = None
    configure: tuple[str, ...] = ()
    ready: str | None = None
    data_dirs: tuple[str, ...] = ()
    disk: str | None = None
    log_files: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: int = 60
    #: which nodes run it (`kernel.system.PLACEMENTS`): all, the first, or all but the first
    nodes: str = "all"


@dataclass(frozen=True, slots=True)
class ProcessSystemConfig:
    """The whole file: the system's name, its processes, and what every process shares."""

    path: Path
    name: str
    processes: tuple[ProcessConfig, ...]
    version: str | None = None
    image: str | None = None
    features: tuple[str, ...] = tuple(FEATURES)
    install: tuple[str, ...] = ()
    session_timeout_ms: int = 6000
    replica_lag_ms: int = 10000
    env: dict[str, str] = field(default_factory=dict)
    client_port: int | None = None
    #: how many brokers Metadata lists once the cluster serves (None: one per node that runs a broker);
    #: 1 for a broker that lists only itself
    brokers_listed: int | None = None

    def broker(self) -> ProcessConfig:
        return next(p for p in self.processes if "broker" in p.roles)

    @property
    def port(self) -> int:
        """Where clients connect: `client_port`, else the broker process's first port."""
        return self.client_port if self.client_port is not None else self.broker().ports[0]


class _Lines:
    """Where a key is in the file, for the sentence that refuses it (tomllib keeps no positions)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def of(self, key: str, process: int | None = None) -> int:
        start, end = 0, len(self.lines)
        if process is not None:
            heads = [i for i, line in enumerate(self.lines) if re.match(r"^\s*\[\[\s*process\s*\]\]", line)]
            if process < len(heads):
                start = heads[process]
                end = heads[process + 1] if process + 1 < len(heads) else len(self.lines)
        else:
            firsts = [i for i, line in enumerate(self.lines) if re.match(r"^\s*\[", line)]
            end = firsts[0] if firsts else len(self.lines)
        pat = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for i in range(start, end):
            if pat.match(self.lines[i]):
                return i + 1
        return start + 1 if process is not None else 1


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return type(value) is int
    if kind == "table":
        return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str | int | bool)
                                               for k, v in value.items())
    if kind == "list[table]":
        return isinstance(value, list) and all(isinstance(x, dict) for x in value)
    inner = kind[5:-1]
    return isinstance(value, list) and all(_type_ok(x, inner) for x in value)


_WANT = {"str": "a string", "int": "an integer", "table": "a table of strings", "list[str]": "a list of strings",
         "list[int]": "a list of integers", "list[table]": "an array of [[process]] tables"}


def _check(d: dict[str, Any], schema: dict[str, tuple[str, bool]], where: str, path: Path, lines: _Lines,
           process: int | None) -> None:
    import difflib

    for key in d:
        if key not in schema:
            close = difflib.get_close_matches(key, list(schema), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(schema)}"
            raise UsageError(f"{path}:{lines.of(key, process)}: unknown key {key!r} in {where}{hint}")
    for key, (kind, required) in schema.items():
        if key not in d:
            if required:
                raise UsageError(f"{path}:{lines.of(key, process) if process is not None else 1}: {where} has no "
                                 f"{key!r} (it needs one: {_WANT[kind]})")
            continue
        if not _type_ok(d[key], kind):
            raise UsageError(f"{path}:{lines.of(key, process)}: {key} in {where} must be {_WANT[kind]}, "
                             f"not {d[key]!r}"[:300])


def _env(d: dict[str, Any]) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in d.items()}


def load(path: Path) -> ProcessSystemConfig:
    """The file at `path`, checked; or one sentence naming the file, the line and what is wrong."""
    try:
        load_toml(path)  # a regular, small, UTF-8, valid TOML file, or its own sentence (with the line)
    except UsageError as e:
        raise UsageError(str(e).replace("config file", "system file", 1)) from None
    text = path.read_text(encoding="utf-8")
    lines = _Lines(text)
    raw = tomllib.loads(text)  # the keys as written (`load_toml` turns dashes into underscores)
    _check(raw, TOP_KEYS, "the file", path, lines, None)
    if not _NAME.match(raw["name"]):
        raise UsageError(f"{path}:{lines.of('name')}: name must be lowercase letters, digits and dashes, "
                         f"not {raw['name']!r}")
    for f in raw.get("features", []):
        if f not in FEATURES:
            raise UsageError(f"{path}:{lines.of('features')}: unknown feature {f!r}; known: {', '.join(FEATURES)}")
    procs = []
    for i, p in enumerate(raw["process"]):
        where = f"[[process]] #{i + 1}"
        _check(p, PROCESS_KEYS, where, path, lines, i)
        for r in p["roles"]:
            if r not in ROLES:
                raise UsageError(f"{path}:{lines.of('roles', i)}: unknown role {r!r} in {where}; "
                                 f"roles: {', '.join(ROLES)}")
        for c in p.get("capabilities", []):
            if c not in CAPABILITIES:
                raise UsageError(f"{path}:{lines.of('capabilities', i)}: unknown capability {c!r} in {where}; "
                                 f"capabilities: {', '.join(CAPABILITIES)}")
        if {"lose-unfsynced", "disk-loss"} & set(p.get("capabilities", [])) and "disk" not in p:
            raise UsageError(f"{path}:{lines.of('capabilities', i)}: {where} claims a disk capability but names no "
                             "`disk` (the data directory the harness mounts its FUSE disk over)")
        if p.get("nodes", "all") not in PLACEMENTS:
            raise UsageError(f"{path}:{lines.of('nodes', i)}: nodes in {where} must be one of "
                             f"{', '.join(PLACEMENTS)}, not {p['nodes']!r}")
        if not _NAME.match(p["name"]):
            raise UsageError(f"{path}:{lines.of('name', i)}: process name must be lowercase letters, digits and "
                             f"dashes, not {p['name']!r}")
        procs.append(ProcessConfig(
            p["name"], tuple(p["roles"]), p["pid_file"], p["start"], tuple(p.get("ports", ())),
            tuple(p.get("capabilities", ())), p.get("stop"), tuple(p.get("configure", ())), p.get("ready"),
            tuple(p.get("data_dirs", ())), p.get("disk"), tuple(p.get("log_files", ())), _env(p.get("env", {})),
            int(p.get("start_timeout_s", 60)), p.get("nodes", "all")))
    names = [p.name for p in procs]
    if len(set(names)) != len(names):
        raise UsageError(f"{path}: two [[process]] tables share a name ({', '.join(names)})")
    disks = [p.name for p in procs if p.disk]
    if len(disks) > 1:
        raise UsageError(f"{path}: only one process may name a `disk` (a node has one FUSE disk), not "
                         f"{', '.join(disks)}")
    brokers = [p for p in procs if "broker" in p.roles]
    if not brokers:
        raise UsageError(f"{path}: no [[process]] plays the broker role (roles = [\"broker\", ...])")
    if "client_port" not in raw and not brokers[0].ports:
        raise UsageError(f"{path}:{lines.of('ports', procs.index(brokers[0]))}: the broker process names no "
                         "ports (its first port is where clients connect)")
    return ProcessSystemConfig(
        path, raw["name"], tuple(procs), raw.get("version"), raw.get("image"),
        tuple(raw.get("features", FEATURES)), tuple(raw.get("install", ())), int(raw.get("session_timeout_ms", 6000)),
        int(raw.get("replica_lag_ms", 10000)), _env(raw.get("env", {})), raw.get("client_port"),
        raw.get("brokers_listed"))

