"""The Kafka admin APIs that change replica placement and leadership, as request readers and
response builders shared by both replication modes.

CreatePartitions (37), ElectLeaders (43), AlterPartitionReassignments (45) and
ListPartitionReassignments (46) are answered by the controller in a ZooKeeper cluster
(`replication/admin_api.py`) and trivially by a standalone broker (`core/broker.py`). What differs
is who decides; how a request reads and how an answer is spelled on the wire is here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbroker.protocol.errors import Err

Key = tuple[str, int]
Outcome = tuple[Err, str | None]
Body = dict[str, Any]


def default_timeout_ms(requested: int | None, fallback: int = 30_000) -> int:
    return requested if requested is not None and requested > 0 else fallback


# --- CreatePartitions ---------------------------------------------------------------------------
def create_partitions_requests(req: Any) -> list[tuple[str, int, list[list[int]] | None]]:
    """(topic, new total count, explicit assignments of the new partitions or None)."""
    out = []
    for t in req.topics:
        assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        out.append((t.name, int(t.count), assignments))
    return out


def create_partitions_body(results: list[tuple[str, Outcome]]) -> Body:
    return {"throttle_time_ms": 0, "results": [
        {"name": name, "error_code": int(err), "error_message": msg} for name, (err, msg) in results]}


# --- ElectLeaders -------------------------------------------------------------------------------
def elect_leaders_request(version: int, req: Any) -> tuple[int, list[Key] | None]:
    """(election type — v0 knows only preferred —, the partitions or None for all of them)."""
    kind = int(req.election_type) if version >= 1 and req.election_type is not None else 0
    if req.topic_partitions is None:
        return kind, None
    return kind, [(t.topic, int(p)) for t in req.topic_partitions for p in t.partitions]


def elect_leaders_body(results: Mapping[Key, Outcome], error: Err = Err.NONE) -> Body:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (err, msg) in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": int(err), "error_message": msg})
    return {"throttle_time_ms": 0, "error_code": int(error), "replica_election_results": [
        {"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


# --- AlterPartitionReassignments ----------------------------------------------------------------
def reassignment_requests(version: int, req: Any) -> tuple[dict[Key, list[int] | None], bool]:
    """(partition -> target replicas, or None to cancel; may the replication factor change?)."""
    allow = bool(req.allow_replication_factor_change) if version >= 1 else True
    out: dict[Key, list[int] | None] = {}
    for t in req.topics:
        for p in t.partitions:
            out[(t.name, int(p.partition_index))] = None if p.replicas is None else [int(r) for r in p.replicas]
    return out, allow


def alter_reassignments_body(results: Mapping[Key, Outcome], error: Outcome = (Err.NONE, None),
                             allow_rf_change: bool = True) -> Body:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (err, msg) in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": int(err), "error_message": msg})
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change, "error_code": int(error[0]),
            "error_message": error[1],
            "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


# --- ListPartitionReassignments -----------------------------------------------------------------
def list_reassignments_request(req: Any) -> list[Key] | None:
    if req.topics is None:
        return None
    return [(t.name, int(p)) for t in req.topics for p in t.partition_indexes]


def list_reassignments_body(moving: Mapping[Key, tuple[list[int], list[int], list[int]]],
                            error: Outcome = (Err.NONE, None)) -> Body:
    """`moving`: partition -> (all replicas, adding, removing)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(moving.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas,
                                               "adding_replicas": adding, "removing_replicas": removing})
    return {"throttle_time_ms": 0, "error_code": int(error[0]), "error_message": error[1],
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
