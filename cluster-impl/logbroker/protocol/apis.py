"""Which APIs and versions we serve, and the codec glue around kafka-python's message classes.

We advertise only versions we implement and test (tests/test_api_versions.py exercises every one
of them through the real server). Versions above our caps change semantics we do not implement
(topic ids instead of names in Produce v13 / Fetch v13, KRaft-only fields), so they stay out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from logbroker.protocol import legacy


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    request: Any
    response: Any
    min_version: int
    max_version: int


APIS: dict[int, Api] = {
    a.key: a
    for a in (
        Api(0, "Produce", ProduceRequest, ProduceResponse, 0, 9),
        Api(1, "Fetch", FetchRequest, FetchResponse, 0, 12),
        Api(2, "ListOffsets", ListOffsetsRequest, ListOffsetsResponse, 1, 7),
        Api(3, "Metadata", MetadataRequest, MetadataResponse, 0, 12),
        # consumer groups (logbroker/group/): the generic protocol with static membership
        # (group.instance.id: JoinGroup v5+, SyncGroup/Heartbeat/LeaveGroup v3+, OffsetCommit v7+);
        # JoinGroup v8 (reason) and v9 (skip_assignment), OffsetCommit v9 (KIP-848 member epochs) and
        # OffsetFetch v8 (batches of groups) stay out; offsets by topic name
        Api(8, "OffsetCommit", OffsetCommitRequest, OffsetCommitResponse, 2, 8),
        Api(9, "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, 1, 7),
        Api(10, "FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, 0, 4),
        Api(11, "JoinGroup", JoinGroupRequest, JoinGroupResponse, 0, 7),
        Api(12, "Heartbeat", HeartbeatRequest, HeartbeatResponse, 0, 4),
        Api(13, "LeaveGroup", LeaveGroupRequest, LeaveGroupResponse, 0, 5),
        Api(14, "SyncGroup", SyncGroupRequest, SyncGroupResponse, 0, 5),
        Api(15, "DescribeGroups", DescribeGroupsRequest, DescribeGroupsResponse, 0, 4),
        Api(16, "ListGroups", ListGroupsRequest, ListGroupsResponse, 0, 4),
        Api(18, "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, 0, 3),
        Api(19, "CreateTopics", CreateTopicsRequest, CreateTopicsResponse, 2, 5),
        Api(20, "DeleteTopics", DeleteTopicsRequest, DeleteTopicsResponse, 1, 5),
        Api(21, "DeleteRecords", DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
        Api(22, "InitProducerId", InitProducerIdRequest, InitProducerIdResponse, 0, 4),
        # for clients (KIP-320 position validation); followers ask through protocol/internal.py
        Api(23, "OffsetForLeaderEpoch", OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4),
        # transactions, the coordinator (logbroker/txn/): AddPartitionsToTxn v4 is the brokers' batch form
        # (KIP-890 verification); EndTxn v5 bumps the epoch (KIP-890 part 2); TxnOffsetCommit (groups)
        Api(24, "AddPartitionsToTxn", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 4),
        Api(25, "AddOffsetsToTxn", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4),
        Api(26, "EndTxn", EndTxnRequest, EndTxnResponse, 0, 5),
        Api(28, "TxnOffsetCommit", TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 4),
        Api(27, "WriteTxnMarkers", WriteTxnMarkersRequest, WriteTxnMarkersResponse, 0, 2),  # broker to broker
        Api(32, "DescribeConfigs", DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
        Api(33, "AlterConfigs", AlterConfigsRequest, AlterConfigsResponse, 0, 2),
        Api(37, "CreatePartitions", CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
        Api(43, "ElectLeaders", ElectLeadersRequest, ElectLeadersResponse, 0, 2),
        Api(44, "IncrementalAlterConfigs", IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
        Api(45, "AlterPartitionReassignments", AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse, 0, 1),
        Api(46, "ListPartitionReassignments", ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse, 0, 0),
        Api(61, "DescribeProducers", DescribeProducersRequest, DescribeProducersResponse, 0, 0),  # KIP-664
        Api(65, "DescribeTransactions", DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
        Api(66, "ListTransactions", ListTransactionsRequest, ListTransactionsResponse, 0, 1),
    )
}

API_VERSIONS_KEY = 18


@dataclass(frozen=True, slots=True)
class RequestHead:
    api_key: int
    api_version: int
    correlation_id: int


def peek_head(frame: bytes) -> RequestHead:
    """api key, version and correlation id: the fixed first 8 bytes of every request header."""
    if len(frame) < 8:
        raise ValueError(f"request frame too short ({len(frame)} bytes)")
    key, ver, corr = struct.unpack_from(">hhi", frame, 0)
    return RequestHead(key, ver, corr)


def decode_request(api: Api, version: int, frame: bytes) -> Any:
    if legacy.is_legacy(api.key, version):
        return legacy.decode(api.key, version, frame)
    req = api.request.decode(frame, version=version, header=True)
    _no_nulls(req._struct._fields, req, version)
    return req


def _no_nulls(fields: Any, obj: Any, version: int) -> None:
    """The codec decodes a length of -1 as null even where the schema says an array or a string cannot
    be null; Kafka calls that a malformed request, and so do we (found by bench-fuzz: handlers iterating
    a null `topics`, and hashing a null AddOffsetsToTxn `group_id`)."""
    for f in fields:
        if not (f.is_array() or f.type_str == "string") or not f.for_version_q(version):
            continue
        v = getattr(obj, f.name, None)
        if v is None:
            if not f.nullable_for_version_q(version):
                raise ValueError(f"null {f.name!r} where the schema allows none")
        elif f.is_struct_array():
            for item in v:
                _no_nulls(f._fields, item, version)


def encode_response(api: Api, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    if legacy.is_legacy(api.key, version):
        return legacy.encode(api.key, version, correlation_id, body)
    resp = make_response(api, version, body)
    resp.with_header(correlation_id=correlation_id)
    return bytes(resp.encode(header=True, framed=True))


def api_versions_body(error: int = 0) -> dict[str, Any]:
    return {
        "error_code": error,
        "api_keys": [
            {"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version} for a in APIS.values()
        ],
        "throttle_time_ms": 0,
    }


_PLANS: dict[Any, tuple[frozenset[str], str, list[tuple[str, Any, bool]]]] = {}


def _plan(cls: Any) -> tuple[frozenset[str], str, list[tuple[str, Any, bool]]]:
    """Per message class, once: its field names, and per field (name, nested class or None, is it
    one struct rather than an array of them). `_build` runs for every request and response a broker
    builds; walking the schema each time was most of its cost."""
    got = _PLANS.get(cls)
    if got is None:
        struct = cls._struct
        fields = []
        for field in struct._fields:
            nested = field.is_struct() or field.is_struct_array()
            fields.append((field.name, getattr(cls, field.type_str) if nested else None, field.is_struct()))
        got = _PLANS[cls] = (frozenset(f.name for f in struct._fields), struct.name, fields)
    return got


def _build(cls: Any, values: dict[str, Any], version: int) -> dict[str, Any]:
    """Turn nested dicts into the codec's data classes (it encodes only its own instances).

    Nested classes hang off their parent class by type name (e.g. `MetadataResponseTopic`).
    """
    names, struct_name, fields = _plan(cls)
    if not names.issuperset(values):
        raise ValueError(f"unknown fields for {struct_name}: {sorted(set(values) - names)}")
    out: dict[str, Any] = {}
    for name, sub, single in fields:
        if name not in values:
            continue
        v = values[name]
        if v is not None and sub is not None:
            if single:
                v = sub(version=version, **_build(sub, v, version))
            else:
                v = [sub(version=version, **_build(sub, item, version)) for item in v]
        out[name] = v
    return out


def make_message(cls: Any, version: int, body: dict[str, Any]) -> Any:
    """A request or response object of `cls` at `version` from plain nested dicts."""
    return cls(version=version, **_build(cls, body, version))


def make_response(api: Api, version: int, body: dict[str, Any]) -> Any:
    return make_message(api.response, version, body)
