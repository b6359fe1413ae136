"""`RunSpec`: everything that defines a run, frozen — exactly what `test.json` holds under "config".

One typed schema serves flags, TOML files and replays alike: each field carries its kind, bounds and
help in its metadata, `build_spec` checks every value against it (a float where an integer belongs,
a string for a bool, NaN or infinity, a value that would hang or do nothing are refused with the
reason), then the cross-field rules run. The CLI's flags are generated from the same table, so a
flag and a TOML key can never disagree. What is known only to a registry (workload, nemesis and
provisioner and system names, bug switches) is checked by the orchestrator's preflight, before anything starts.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from kernel.errors import UsageError
from kernel.names import check_name, check_topic

MAX_CONFIG_BYTES = 1 << 20
#: every fault family, plain and composed: the nemesis registry expands `all` before a run starts, so
#: test.json holds the families by name (and a new family is one file plus one registry line)
DEFAULT_NEMESIS = ("all",)
ACKS = ("all", "1", "0")
#: how consumers get their keys (Jepsen's --sub-via): `assign`, or `subscribe` to the run's consumer group
SUB_VIA = ("assign", "subscribe")
#: the transactional workload's modes: plain transactions of sends and polls, or consume-transform-produce
TXN_MODES = ("plain", "ctp")


def _s(help: str, *, lo: float | None = None, hi: float | None = None, why: str = "", flag: str | None = None,
       choices: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"help": help, "lo": lo, "hi": hi, "why": why, "flag": flag, "choices": choices}


@dataclass(frozen=True, slots=True)
class RunSpec:
    name: str = field(default="", metadata=_s(
        "Test name (store/<name>/...); '' (the default) names the test after its workload (store/txn/... for --txn)."))
    workload: str = field(default="queue", metadata=_s("Workload."))
    system: str = field(default="", metadata=_s(
        "System under test: a name `chaos systems` lists (default: our own broker, cluster-impl/), or "
        "process:FILE.toml (any Kafka-protocol broker that file describes)."))
    system_version: str = field(default="", metadata=_s(
        "Version of the system under test, for a system built from its registry (tansu: 0.6.0 unless "
        "given); '' for the system's default."))
    nodes: int = field(default=5, metadata=_s("Number of nodes.", lo=1, hi=32,
                                              why="a cluster on one machine beyond 32 nodes is not a useful test"))
    nemesis: tuple[str, ...] = field(default=DEFAULT_NEMESIS, metadata=_s(
        "Comma-separated fault families or family-kind names, all for every family; '' for none."))
    nemesis_interval: float = field(default=10.0, metadata=_s(
        "Seconds between faults.", lo=0.5, hi=3600, why="a fault takes a few SSH round trips to start and stop"))
    max_active: int = field(default=2, metadata=_s(
        "How many faults may be active at once (they overlap when more than 1).", lo=1, hi=8))
    time_limit: float = field(default=60.0, metadata=_s(
        "Seconds of workload.", lo=1, hi=86400, why="a run is between a second and a day"))
    concurrency: int = field(default=8, metadata=_s("Client workers (one op in flight each).", lo=1, hi=256))
    rate: float = field(default=1000.0, metadata=_s(
        "Target ops/s over all workers (a send op carries 1-8 sends).", lo=0.1, hi=100_000))
    seed: int = field(default=0, metadata=_s("Run seed (default: from the clock, and saved).", lo=0, hi=2**63 - 1))
    acks: str = field(default="all", metadata=_s("Producer acks: all, 1 or 0.", choices=ACKS))
    idempotence: bool = field(default=True, metadata=_s("Idempotent producers.", flag="--idempotence/--no-idempotence"))
    replication_factor: int = field(default=3, metadata=_s("Replicas per partition.", lo=1, hi=32))
    min_insync: int = field(default=2, metadata=_s("min.insync.replicas.", lo=1, hi=32))
    partitions: int = field(default=4, metadata=_s(
        "Keys (= partitions of the topic).", lo=1, hi=256,
        why="every partition is a key the workload, the final drain and the checks must cover"))
    bugs: tuple[str, ...] = field(default=(), metadata=_s("Turn on a broker bug switch (repeatable).", flag="--bug"))
    sub_via: tuple[str, ...] = field(default=("assign",), metadata=_s(
        "How consumers get keys: assign, subscribe (the run's consumer group) or both (workers split by the seed).",
        choices=SUB_VIA))
    txn_mode: str = field(default="plain", metadata=_s(
        "Transactional workload (--workload txn): plain, or ctp (consume-transform-produce: the consumer's "
        "offsets committed inside each transaction; needs --sub-via subscribe).", choices=TXN_MODES))
    provisioner: str = field(default="docker", metadata=_s("docker, ssh or sim (the deterministic simulator)."))
    hosts: str | None = field(default=None, metadata=_s("ssh provisioner: hosts file."))
    store: str = field(default="store", metadata=_s("Run store directory."))
    topic: str = field(default="chaos", metadata=_s("Topic the workload uses."))
    recovery_timeout: float = field(default=30.0, metadata=_s(
        "Seconds to wait after healing for every partition to have a leader and full ISR.", lo=1, hi=3600))
    leave_running: bool = field(default=False, metadata=_s("Keep the cluster up afterwards.", flag="--leave-running"))
    cluster: str = field(default="chaos", metadata=_s("Cluster name (label chaos.cluster)."))
    check_determinism: bool = field(default=False, metadata=_s(
        "sim provisioner: run the seed twice; fail on the first differing history line.", flag="--check-determinism"))
    extra: dict[str, str] = field(default_factory=dict, metadata=_s("Extra broker settings (TOML table only)."))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["nemesis"] = list(self.nemesis)
        d["bugs"] = list(self.bugs)
        d["sub_via"] = list(self.sub_via)
        return d

    @classmethod
    def from_json(cls, d: Any) -> RunSpec:
        if not isinstance(d, dict):
            raise UsageError(f"a run configuration must be a table of settings, not {type(d).__name__}")
        return build_spec(d)


FIELDS = {f.name: f for f in fields(RunSpec)}


def default_of(name: str) -> Any:
    f = FIELDS[name]
    if f.default is not MISSING:
        return f.default
    return f.default_factory()  # type: ignore[misc,operator]


def _bad(name: str, value: Any, want: str) -> UsageError:
    shown = repr(value) if len(repr(value)) < 60 else repr(value)[:57] + "..."
    return UsageError(f"{name.replace('_', '-')} must be {want}, not {shown}")


def _number(name: str, value: Any, kind: type) -> int | float:
    meta = FIELDS[name].metadata
    if kind is int:
        if type(value) is not int:
            raise _bad(name, value, "an integer")
    else:
        if type(value) not in (int, float):
            raise _bad(name, value, "a number")
        value = float(value)
        if not math.isfinite(value):
            raise _bad(name, value, "a finite number")
    lo, hi = meta["lo"], meta["hi"]
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        why = f" ({meta['why']})" if meta["why"] else ""
        raise UsageError(f"{name.replace('_', '-')} must be between {lo:g} and {hi:g}, not {value:g}{why}")
    return value


def _names(name: str, value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
        raise _bad(name, value, "a list of names (or one comma-separated string)")
    return tuple(x.strip() for x in items if x.strip())


def _coerce(name: str, value: Any) -> Any:
    """One value against its field's kind and bounds."""
    kind = FIELDS[name].type
    if name in ("nemesis", "bugs"):
        return _names(name, value)
    if name == "sub_via":
        modes = _names(name, value)
        bad = [m for m in modes if m not in SUB_VIA]
        if bad or not modes or len(set(modes)) != len(modes):
            raise _bad(name, value, "assign, subscribe or assign,subscribe (each once)")
        return modes
    if name == "txn_mode":
        if value not in TXN_MODES:
            raise _bad(name, value, "plain or ctp")
        return value
    if name == "acks":
        if type(value) is int and value in (-1, 0, 1):
            value = "all" if value == -1 else str(value)
        if value == "-1":
            value = "all"
        if value not in ACKS:
            raise _bad(name, value, "all, 1 or 0")
        return value
    if name == "extra":
        if not isinstance(value, dict):
            raise _bad(name, value, "a table of broker settings")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or not k.replace(".", "").replace("_", "").isalnum():
                raise UsageError(f"extra broker setting name {k!r} is not a config key (letters, digits, '.', '_')")
            if isinstance(v, bool):
                v = str(v).lower()
            if type(v) not in (str, int) or (isinstance(v, str) and ("\n" in v or "=" in v)):
                raise UsageError(f"extra broker setting {k} must be a one-line string or an integer, not {v!r}")
            out[k] = str(v)
        return out
    if kind in ("int", int):
        return _number(name, value, int)
    if kind in ("float", float):
        return _number(name, value, float)
    if kind in ("bool", bool):
        if type(value) is not bool:
            raise _bad(name, value, "true or false")
        return value
    if kind in ("str | None",) and value is None:
        return None
    if not isinstance(value, str):
        raise _bad(name, value, "a string")
    if "\0" in value:
        raise _bad(name, value, "a string without NUL bytes")
    return value


def _cross_check(s: RunSpec) -> RunSpec:
    """Rules between fields; the message says how to fix the combination."""
    if not s.name:
        # a run is filed under what it did: a transactional run among the queue runs would be read as one
        s = replace(s, name=s.workload)
    check_name(s.name, "test name")
    check_name(s.cluster, "cluster name")
    check_topic(s.topic)
    if s.replication_factor > s.nodes:
        raise UsageError(f"replication-factor {s.replication_factor} needs at least that many nodes, not {s.nodes}")
    if s.min_insync > s.replication_factor:
        raise UsageError(f"min-insync {s.min_insync} cannot exceed the replication factor {s.replication_factor}")
    if s.idempotence and s.acks != "all":
        raise UsageError(f"acks {s.acks} cannot be used with idempotent producers (Kafka requires acks=all for "
                         "idempotence); add --no-idempotence (idempotence = false) or use acks all")
    if s.txn_mode == "ctp" and (s.workload != "txn" or s.sub_via != ("subscribe",)):
        raise UsageError("txn-mode ctp commits a consumer group's offsets inside each transaction: it needs "
                         "--workload txn and --sub-via subscribe")
    if s.provisioner == "ssh" and not s.hosts:
        raise UsageError("the ssh provisioner needs --hosts FILE (one `[name] address[:port]` per line)")
    if s.hosts is not None and not Path(s.hosts).is_file():
        raise UsageError(f"hosts file {s.hosts} does not exist or is not a regular file")
    if not s.store:
        raise UsageError("store must name a directory")
    if Path(s.store).exists() and not Path(s.store).is_dir():
        raise UsageError(f"store {s.store} exists and is not a directory")
    return s


def build_spec(values: dict[str, Any], base: RunSpec | None = None) -> RunSpec:
    """`base` (default: the defaults) with `values` applied, every value and rule checked."""
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise UsageError(f"unknown run setting(s): {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}")
    clean = {k: _coerce(k, v) for k, v in values.items()}
    return _cross_check(replace(base or RunSpec(), **clean))


def load_toml(path: Path) -> dict[str, Any]:
    """A `--config` file's settings (dashes or underscores in keys). Only a regular, small, UTF-8
    TOML file is read: a FIFO would block forever, a directory or a binary file is a mistake."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"config file {path} does not exist") from None
    except OSError as e:
        raise UsageError(f"config file {path} cannot be read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"config file {path} is not a regular file")
    if st.st_size > MAX_CONFIG_BYTES:
        raise UsageError(f"config file {path} is {st.st_size} bytes; a run configuration is at most 1 MiB")
    try:
        with open(path, "rb") as f:
            data = tomllib.loads(f.read().decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"config file {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"config file {path} is not valid TOML: {e}") from None
    except OSError as e:
        raise UsageError(f"config file {path} cannot be read: {e.strerror}") from None
    return {k.replace("-", "_"): v for k, v in data.items()}
