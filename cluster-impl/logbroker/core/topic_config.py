"""Topic configs: which ones this broker honours, which it refuses, and the effective values.

A client that sets a topic config expects it to take effect. Kafka configs this broker cannot
honour are refused with INVALID_CONFIG and a reason, never stored and silently ignored:
- honoured: `min.insync.replicas`, `max.message.bytes`, `segment.bytes`, `flush.messages`,
  `flush.ms`, `unclean.leader.election.enable`;
- honoured only at the value that describes this broker: `cleanup.policy=delete` (there is no
  compaction), `retention.ms=-1` and `retention.bytes=-1` (nothing is ever deleted: a finite
  retention would be a promise we do not keep), `compression.type=producer` (batches are stored
  as producers send them);
- anything else, a real Kafka key or a typo: refused.
Overrides live in ZooKeeper at `/config/topics/<topic>` (Kafka's path and format); a standalone
broker keeps them in `topic-configs.json` under log.dirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from logbroker.config import BrokerConfig
from logbroker.protocol.errors import Err


def _int(lo: int) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        try:
            n = int(v)
        except ValueError:
            return f"{v!r} is not an integer"
        return None if n >= lo else f"{n} is below {lo}"

    return check


def _only(*allowed: str, why: str) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        return None if v.strip().lower() in allowed else f"only {' or '.join(allowed)} is supported: {why}"

    return check


def _bool(v: str) -> str | None:
    return None if v.lower() in ("true", "false") else f"{v!r} is not true or false"


CHECKS: dict[str, Callable[[str], str | None]] = {
    "min.insync.replicas": _int(1),
    "max.message.bytes": _int(0),
    "segment.bytes": _int(14),
    "flush.messages": _int(1),
    "flush.ms": _int(0),
    "unclean.leader.election.enable": _bool,
    "cleanup.policy": _only("delete", why="there is no log compaction"),
    "retention.ms": _only("-1", why="no log segment is ever deleted"),
    "retention.bytes": _only("-1", why="no log segment is ever deleted"),
    "compression.type": _only("producer", why="batches are stored as producers compress them"),
}


def validate(configs: Mapping[str, str | None]) -> tuple[Err, str | None]:
    """(NONE, None) if every key is one we honour at a value we can honour, else INVALID_CONFIG."""
    for k, v in configs.items():
        check = CHECKS.get(k)
        if check is None:
            return Err.INVALID_CONFIG, f"unknown or unsupported topic config {k!r}"
        if v is None:
            return Err.INVALID_CONFIG, f"topic config {k!r} needs a value"
        problem = check(v)
        if problem is not None:
            return Err.INVALID_CONFIG, f"{k}: {problem}"
    return Err.NONE, None


def defaults(cfg: BrokerConfig) -> dict[str, str]:
    """Each supported key's value for a topic without overrides (from the broker's config)."""
    return {
        "min.insync.replicas": str(cfg.min_insync_replicas),
        "max.message.bytes": str(cfg.message_max_bytes),
        "segment.bytes": str(cfg.segment_bytes),
        "flush.messages": str(cfg.flush_messages),
        "flush.ms": str(cfg.flush_ms),
        "unclean.leader.election.enable": str(cfg.unclean_leader_election).lower(),
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "compression.type": "producer",
    }


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """The effective values the broker acts on."""

    min_insync_replicas: int
    max_message_bytes: int
    segment_bytes: int
    flush_messages: int
    flush_ms: int
    unclean_leader_election: bool


def effective(cfg: BrokerConfig, overrides: Mapping[str, str]) -> TopicSettings:
    v = {**defaults(cfg), **overrides}
    return TopicSettings(int(v["min.insync.replicas"]), int(v["max.message.bytes"]), int(v["segment.bytes"]),
                         int(v["flush.messages"]), int(v["flush.ms"]),
                         v["unclean.leader.election.enable"].lower() == "true")
