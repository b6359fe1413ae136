"""Topic admin APIs as clients expect them: CreateTopics (configs, manual assignments, validate_only),
DeleteTopics, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics.

This module reads requests, validates them against this broker's view (`core/topic_config.py` says
which configs are honoured) and spells the answers; the replication layer decides where a change
is made — the standalone broker itself, or ZooKeeper and the controller in a cluster. A request
that fails validation changes nothing: an unknown config key refuses the topic before anything is
written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from logbroker.config import BrokerConfig
from logbroker.core import topic_config
from logbroker.core.metadata import MetadataCache
from logbroker.core.reply import TOPIC_RE, Reply
from logbroker.protocol.errors import Err

TOPIC, BROKER = 2, 4  # resource types
SET, DELETE, APPEND, SUBTRACT = range(4)  # IncrementalAlterConfigs operations
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
CONFIG_TYPES = {"min.insync.replicas": 3, "max.message.bytes": 3, "segment.bytes": 3, "flush.messages": 5,
                "flush.ms": 5, "unclean.leader.election.enable": 1, "cleanup.policy": 7, "retention.ms": 5,
                "retention.bytes": 5, "compression.type": 2}
Outcome = tuple[Err, str | None]


def check_assignment(assignments: Any, live: set[int]) -> tuple[dict[int, list[int]] | None, Outcome]:
    """Kafka's rules for a manual assignment: partitions 0..n-1 each listed once, the same number of
    replicas each, no broker twice in a partition, every broker live."""
    out: dict[int, list[int]] = {}
    for a in assignments:
        p, brokers = int(a.partition_index), [int(b) for b in a.broker_ids]
        if p in out:
            return None, (Err.INVALID_REPLICA_ASSIGNMENT, f"partition {p} is assigned twice")
        if not brokers or len(set(brokers)) != len(brokers):
            return None, (Err.INVALID_REPLICA_ASSIGNMENT, f"partition {p}: replicas {brokers} are empty or repeat")
        unknown = sorted(set(brokers) - live)
        if unknown:
            return None, (Err.INVALID_REPLICA_ASSIGNMENT, f"partition {p}: brokers {unknown} are not live")
        out[p] = brokers
    if sorted(out) != list(range(len(out))):
        return None, (Err.INVALID_REPLICA_ASSIGNMENT, f"partitions must be 0..{len(out) - 1}, got {sorted(out)}")
    if len({len(r) for r in out.values()}) != 1:
        return None, (Err.INVALID_REPLICA_ASSIGNMENT, "every partition must have the same number of replicas")
    return out, (Err.NONE, None)


class TopicAdmin:
    def __init__(self, core: TopicAdminHost) -> None:
        self.core = core

    def _reply(self, version: int, body: dict[str, Any]) -> Reply:
        return Reply(version, body)

    # --- CreateTopics (19) ------------------------------------------------------------------------
    def create_topics(self, version: int, req: Any) -> Reply:
        cfg = self.core.config
        results = []
        for t in req.topics:
            n = t.num_partitions if t.num_partitions > 0 else cfg.num_partitions
            rf = t.replication_factor if t.replication_factor > 0 else cfg.default_replication_factor
            configs = {c.name: c.value for c in (t.configs or [])}
            assignment: dict[int, list[int]] | None = None
            err, msg = topic_config.validate(configs)
            if not TOPIC_RE.match(t.name):
                err, msg = Err.INVALID_TOPIC_EXCEPTION, f"invalid topic name {t.name!r}"
            elif t.name in self.core.metadata.topics:
                err, msg = Err.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists"
            elif err == Err.NONE and t.assignments:
                if t.num_partitions > 0 or t.replication_factor > 0:
                    err, msg = Err.INVALID_REQUEST, "give either a replica assignment or counts, not both"
                else:
                    assignment, (err, msg) = check_assignment(t.assignments, set(self.core.metadata.brokers))
                    if assignment is not None:
                        n, rf = len(assignment), len(assignment[0])
            if err == Err.NONE and not req.validate_only:
                err = self.core.replication.create_topic(t.name, n, rf, configs, assignment)
                msg = None if err == Err.NONE else err.name
            ok = err == Err.NONE
            result = {"name": t.name, "error_code": int(err), "error_message": msg,
                      "num_partitions": n if ok else -1, "replication_factor": rf if ok else -1}
            if version >= 5:  # v5 answers with the topic's configs
                result["configs"] = self._config_entries(configs) if err == Err.NONE else None
            results.append(result)
        return self._reply(version, {"throttle_time_ms": 0, "topics": results})

    def _config_entries(self, overrides: dict[str, str]) -> list[dict[str, Any]]:
        values = {**topic_config.defaults(self.core.config), **overrides}
        return [{"name": k, "value": v, "read_only": False, "is_sensitive": False,
                 "config_source": DYNAMIC_TOPIC_CONFIG if k in overrides else DEFAULT_CONFIG}
                for k, v in sorted(values.items())]

    # --- DeleteTopics (20) ------------------------------------------------------------------------
    def delete_topics(self, version: int, req: Any) -> Reply:
        names = [t.name for t in req.topics] if version >= 6 else list(req.topic_names)
        return self.core.replication.delete_topics(version, names, int(req.timeout_ms))

    @staticmethod
    def delete_topics_body(results: dict[str, Outcome]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "responses": [
            {"name": n, "error_code": int(e), "error_message": m} for n, (e, m) in results.items()]}

    # --- DescribeConfigs (32) ---------------------------------------------------------------------
    def describe_configs(self, version: int, req: Any) -> Reply:
        results = []
        for r in req.resources:
            keys = set(r.configuration_keys) if r.configuration_keys is not None else None
            entries: list[dict[str, Any]] = []
            err, msg = Err.NONE, None
            if r.resource_type == TOPIC:
                if r.resource_name not in self.core.metadata.topics:
                    err, msg = Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {r.resource_name!r} does not exist"
                else:
                    overrides = self.core.metadata.topic_configs.get(r.resource_name, {})
                    entries = self._describe(overrides, keys, bool(getattr(r, "include_synonyms", False)))
            elif r.resource_type == BROKER:
                if r.resource_name not in ("", str(self.core.config.broker_id)):
                    err, msg = Err.INVALID_REQUEST, "describe a broker's configs on that broker"
                else:
                    entries = [{"name": k, "value": v, "read_only": True, "is_sensitive": False,
                                "config_source": STATIC_BROKER_CONFIG, "synonyms": [], "config_type": 2,
                                "documentation": None}
                               for k, v in sorted(self.broker_configs().items()) if keys is None or k in keys]
            else:
                err, msg = Err.INVALID_REQUEST, f"resource type {r.resource_type} is not supported"
            results.append({"error_code": int(err), "error_message": msg, "resource_type": r.resource_type,
                            "resource_name": r.resource_name, "configs": entries})
        return self._reply(version, {"throttle_time_ms": 0, "results": results})

    def _describe(self, overrides: dict[str, str], keys: set[str] | None, synonyms: bool) -> list[dict[str, Any]]:
        base = topic_config.defaults(self.core.config)
        out = []
        for k, default in sorted(base.items()):
            if keys is not None and k not in keys:
                continue
            src = DYNAMIC_TOPIC_CONFIG if k in overrides else DEFAULT_CONFIG
            syn = []
            if synonyms:
                if k in overrides:
                    syn.append({"name": k, "value": overrides[k], "source": DYNAMIC_TOPIC_CONFIG})
                syn.append({"name": k, "value": default, "source": DEFAULT_CONFIG})
            out.append({"name": k, "value": overrides.get(k, default), "read_only": False, "is_sensitive": False,
                        "config_source": src, "synonyms": syn, "config_type": CONFIG_TYPES.get(k, 2),
                        "documentation": None})
        return out

    def broker_configs(self) -> dict[str, str]:
        c = self.core.config
        return {"broker.id": str(c.broker_id), "min.insync.replicas": str(c.min_insync_replicas),
                "default.replication.factor": str(c.default_replication_factor),
                "num.partitions": str(c.num_partitions), "message.max.bytes": str(c.message_max_bytes),
                "replica.lag.time.max.ms": str(c.replica_lag_time_max_ms),
                "unclean.leader.election.enable": str(c.unclean_leader_election).lower(),
                "auto.create.topics.enable": str(c.auto_create_topics).lower(),
                "log.segment.bytes": str(c.segment_bytes),
                "connections.max.idle.ms": str(c.connections_max_idle_ms)}

    # --- AlterConfigs (33) and IncrementalAlterConfigs (44) ----------------------------------------
    def alter_configs(self, version: int, req: Any, *, incremental: bool) -> Reply:
        """The new overrides of every topic resource are computed and validated here; the replication
        layer stores them (all or none per resource)."""
        outcomes: dict[tuple[int, str], Outcome] = {}
        changes: dict[str, dict[str, str]] = {}
        for r in req.resources:
            key = (int(r.resource_type), r.resource_name)
            if r.resource_type != TOPIC:
                outcomes[key] = (Err.INVALID_CONFIG, "only topic configs can be changed; broker configs are static")
                continue
            if r.resource_name not in self.core.metadata.topics:
                outcomes[key] = (Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {r.resource_name!r} does not exist")
                continue
            current = dict(self.core.metadata.topic_configs.get(r.resource_name, {}))
            new, outcome = (apply_incremental(current, r.configs) if incremental
                            else ({c.name: c.value for c in r.configs}, (Err.NONE, None)))
            if outcome[0] == Err.NONE:
                outcome = topic_config.validate(new)
            outcomes[key] = outcome
            if outcome[0] == Err.NONE:
                changes[r.resource_name] = new

        def body(stored: dict[str, Outcome]) -> dict[str, Any]:
            done = {**outcomes, **{(TOPIC, t): o for t, o in stored.items()}}
            return {"throttle_time_ms": 0, "responses": [
                {"error_code": int(e), "error_message": m, "resource_type": t, "resource_name": n}
                for (t, n), (e, m) in done.items()]}

        if req.validate_only or not changes:
            return self._reply(version, body({}))
        return self.core.replication.alter_topic_configs(version, changes, body)


def apply_incremental(current: dict[str, str], ops: Any) -> tuple[dict[str, str], Outcome]:
    new = dict(current)
    for c in ops:
        op = int(c.config_operation)
        if op == SET:
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            if c.name != "cleanup.policy":
                return new, (Err.INVALID_CONFIG, f"{c.name} is not a list; APPEND/SUBTRACT apply to lists")
            items = [x for x in new.get(c.name, "delete").split(",") if x]
            vals = [x for x in (c.value or "").split(",") if x]
            items = items + [v for v in vals if v not in items] if op == APPEND else [x for x in items if x not in vals]
            new[c.name] = ",".join(items)
        else:
            return new, (Err.INVALID_REQUEST, f"unknown config operation {op}")
    return new, (Err.NONE, None)


AlterBody = Callable[[dict[str, Outcome]], dict[str, Any]]


class TopicReplication(Protocol):
    """The part of the broker's replication layer (`broker.Replication`) that topic admin calls."""

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: dict[int, list[int]] | None = None) -> Err: ...

    def delete_topics(self, version: int, names: list[str], timeout_ms: int) -> Reply: ...

    def alter_topic_configs(self, version: int, changes: dict[str, dict[str, str]], body: AlterBody) -> Reply: ...


class TopicAdminHost(Protocol):
    """What topic admin reads of the broker core (`BrokerCore`), so it need not import the core."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def replication(self) -> TopicReplication: ...
