"""Broker configuration: a Kafka-style `.properties` file, `-o key=value` overrides, `--bug NAME`.

Keys use Kafka's names so an operator needs no glossary. An unknown key is an error (a typo must
not silently run a different experiment).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from logbroker.bugs import Bug, parse_bugs

DEFAULTS: dict[str, str] = {
    "broker.id": "1",
    "listeners": "PLAINTEXT://0.0.0.0:9092",
    "advertised.host": "",
    "advertised.port": "0",
    "log.dirs": "/var/lib/logbroker",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "flush.messages": str(2**62),
    "flush.ms": str(2**62),
    "log.segment.bytes": str(64 * 1024 * 1024),
    "zookeeper.connect": "",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "replica.fetch.wait.max.ms": "200",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "leader.imbalance.per.broker.percentage": "10",
    "auto.create.topics.enable": "true",
    "message.max.bytes": str(1024 * 1024 + 12),
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "queued.max.request.bytes": str(100 * 1024 * 1024),
    "connections.max.idle.ms": str(10 * 60 * 1000),
    "request.timeout.ms": "30000",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.commit.timeout.ms": "5000",
    "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "transaction.state.log.num.partitions": "50",
    "transaction.kip890.enable": "true",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "probes.dir": "",
}


class ConfigError(ValueError):
    """A bad config file, key or value; the message says which."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    broker_id: int
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    log_dirs: Path
    num_partitions: int
    default_replication_factor: int
    min_insync_replicas: int
    flush_messages: int
    flush_ms: int
    segment_bytes: int
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    replica_lag_time_max_ms: int
    replica_fetch_wait_max_ms: int
    unclean_leader_election: bool
    auto_leader_rebalance: bool
    leader_imbalance_check_interval_s: float
    leader_imbalance_per_broker_percentage: int
    auto_create_topics: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    queued_max_request_bytes: int
    connections_max_idle_ms: int
    bugs: frozenset[Bug] = field(default_factory=frozenset)
    # consumer groups (logbroker/group/), Kafka's names and defaults
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    # transactions (issue 27): where coordinators live, and KIP-890 (partition verification, epoch bump
    # at every transaction end), read by the partition leaders and the transaction coordinators alike
    transaction_state_log_num_partitions: int = 50
    transaction_kip890_enable: bool = True
    # the transaction coordinator (logbroker/txn/): its topic, the longest transaction a producer may
    # ask for, and how often timed-out transactions are looked for (Kafka's names and defaults)
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_max_timeout_ms: int = 900000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    #: where this process writes its coverage probe counts (`probes.py`); None: kept in memory only
    probes_dir: Path | None = None

    @property
    def standalone(self) -> bool:
        """No ZooKeeper: one broker that leads every partition (cluster-impl I's scope)."""
        return not self.zookeeper_connect


def parse_properties(text: str, source: str = "<config>") -> dict[str, str]:
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        if "=" not in line:
            raise ConfigError(f"{source}:{n}: expected key=value, got {raw.strip()!r}")
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def load_config(path: Path | None, overrides: Iterable[str] = (), bugs: Iterable[str] = ()) -> BrokerConfig:
    values = dict(DEFAULTS)
    given: dict[str, str] = {}
    if path is not None:
        try:
            given.update(parse_properties(path.read_text(), str(path)))
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value")
        k, v = item.split("=", 1)
        given[k.strip()] = v.strip()
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(unknown)}")
    values.update(given)
    try:
        bug_set = parse_bugs(bugs)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return from_mapping(values, bug_set)


def from_mapping(v: Mapping[str, str], bugs: frozenset[Bug] = frozenset()) -> BrokerConfig:
    def num(key: str) -> int:
        try:
            return int(v[key])
        except ValueError:
            raise ConfigError(f"{key} must be an integer, not {v[key]!r}") from None

    def flag(key: str) -> bool:
        s = v[key].lower()
        if s not in ("true", "false"):
            raise ConfigError(f"{key} must be true or false, not {v[key]!r}")
        return s == "true"

    def positive_seconds(key: str) -> float:
        try:
            val = float(v[key])
        except ValueError:
            raise ConfigError(f"{key} must be a number of seconds, not {v[key]!r}") from None
        if val <= 0:
            raise ConfigError(f"{key} must be positive, not {v[key]!r}")
        return val

    listener = v["listeners"].split(",")[0]
    hostport = listener.split("://", 1)[-1]
    host, _, port_s = hostport.rpartition(":")
    if not port_s.isdigit():
        raise ConfigError(f"listeners: cannot find a port in {listener!r}")
    return BrokerConfig(
        broker_id=num("broker.id"),
        host=host or "0.0.0.0",
        port=int(port_s),
        advertised_host=v["advertised.host"] or (host if host not in ("", "0.0.0.0") else "127.0.0.1"),
        advertised_port=num("advertised.port") or int(port_s),
        log_dirs=Path(v["log.dirs"]),
        num_partitions=num("num.partitions"),
        default_replication_factor=num("default.replication.factor"),
        min_insync_replicas=num("min.insync.replicas"),
        flush_messages=num("flush.messages"),
        flush_ms=num("flush.ms"),
        segment_bytes=num("log.segment.bytes"),
        zookeeper_connect=v["zookeeper.connect"],
        zookeeper_session_timeout_ms=num("zookeeper.session.timeout.ms"),
        replica_lag_time_max_ms=num("replica.lag.time.max.ms"),
        replica_fetch_wait_max_ms=num("replica.fetch.wait.max.ms"),
        unclean_leader_election=flag("unclean.leader.election.enable"),
        auto_leader_rebalance=flag("auto.leader.rebalance.enable"),
        leader_imbalance_check_interval_s=positive_seconds("leader.imbalance.check.interval.seconds"),
        leader_imbalance_per_broker_percentage=num("leader.imbalance.per.broker.percentage"),
        auto_create_topics=flag("auto.create.topics.enable"),
        message_max_bytes=num("message.max.bytes"),
        socket_request_max_bytes=num("socket.request.max.bytes"),
        queued_max_request_bytes=max(num("queued.max.request.bytes"), num("socket.request.max.bytes")),
        connections_max_idle_ms=num("connections.max.idle.ms"),
        bugs=bugs,
        offsets_topic_num_partitions=num("offsets.topic.num.partitions"),
        offsets_topic_replication_factor=num("offsets.topic.replication.factor"),
        offsets_commit_timeout_ms=num("offsets.commit.timeout.ms"),
        offset_metadata_max_bytes=num("offset.metadata.max.bytes"),
        group_initial_rebalance_delay_ms=num("group.initial.rebalance.delay.ms"),
        group_min_session_timeout_ms=num("group.min.session.timeout.ms"),
        group_max_session_timeout_ms=num("group.max.session.timeout.ms"),
        transaction_state_log_num_partitions=num("transaction.state.log.num.partitions"),
        transaction_kip890_enable=flag("transaction.kip890.enable"),
        transaction_state_log_replication_factor=num("transaction.state.log.replication.factor"),
        transaction_state_log_min_isr=num("transaction.state.log.min.isr"),
        transaction_max_timeout_ms=num("transaction.max.timeout.ms"),
        transaction_abort_timed_out_transaction_cleanup_interval_ms=num(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        probes_dir=Path(v["probes.dir"]) if v["probes.dir"] else None,
    )
