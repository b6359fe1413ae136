"""The broker settings a run deploys: the part of the RunSpec that becomes every broker's config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kernel.errors import UsageError
from kernel.spec import RunSpec


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """What goes into every node's broker.properties (plus `--bug` flags on the command line).

    Defaults are the safe configuration: acks=all with RF 3 and min ISR 2, no unclean election, no
    bug switches. `flush_messages=None` keeps the broker's default (fsync left to the OS).
    """

    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    bugs: tuple[str, ...] = ()
    flush_messages: int | None = None
    session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 10000
    partitions: int = 5
    extra: Mapping[str, str] = field(default_factory=dict)


#: the settings whose values the fault plan must know, by their broker.properties names
SESSION_KEY = "zookeeper.session.timeout.ms"
LAG_KEY = "replica.lag.time.max.ms"


def settings_for(spec: RunSpec) -> BrokerSettings:
    """The one settings record of a run: what the deployment writes (containers and the simulator)
    and the timeouts the fault plan outlasts. A timeout set through the run's `extra` table is
    honoured by both (it used to reach the brokers only)."""
    extra = dict(spec.extra)
    base = BrokerSettings()
    return BrokerSettings(replication_factor=spec.replication_factor, min_insync_replicas=spec.min_insync,
                          bugs=tuple(spec.bugs), partitions=spec.partitions, flush_messages=1,
                          session_timeout_ms=_ms(extra, SESSION_KEY, base.session_timeout_ms),
                          replica_lag_time_max_ms=_ms(extra, LAG_KEY, base.replica_lag_time_max_ms),
                          extra={k: v for k, v in extra.items() if k not in (SESSION_KEY, LAG_KEY)})


def _ms(extra: Mapping[str, str], key: str, default: int) -> int:
    raw = extra.get(key)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f"extra broker setting {key} must be a positive number of milliseconds, not {raw!r}")
    return int(raw)
