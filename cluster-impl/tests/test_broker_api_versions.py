"""Every API version we advertise answers a well-formed request through the real server.

Requests are built with kafka-python's classes at each version; the response must decode at that
version and make sense. This is what keeps our ApiVersions answer honest.
"""

from __future__ import annotations

from typing import Any

import pytest
from brokerlib import BrokerProc
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from logbroker.protocol import legacy
from logbroker.protocol.apis import APIS, make_message
from rawclient import RawClient, batch

TOPIC = "versions"
GROW = "grow"


def request_body(key: int, version: int) -> dict[str, Any]:
    if key == 0:
        return {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch([b"v%d" % version])}]}]}
    if key == 1:
        return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                            "fetch_offset": 0,
                                                            "last_fetched_epoch": -1, "log_start_offset": -1,
                                                            "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
    if key == 2:
        return {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                           "timestamp": -1}]}]}
    if key == 3:
        return {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    if key == 18:
        return {"client_software_name": "raw", "client_software_version": "1"}
    if key == 19:
        return {"topics": [{"name": f"created-v{version}", "num_partitions": 1, "replication_factor": 1,
                            "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False}
    if key == 20:  # each version deletes its own topic, made by the fixture
        return {"topic_names": [f"doomed-v{version}"], "timeout_ms": 5000}
    if key == 32:
        return {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}],
                "include_synonyms": True, "include_documentation": False}
    if key == 33:
        return {"resources": [{"resource_type": 2, "resource_name": GROW, "configs": [
            {"name": "min.insync.replicas", "value": "1"}]}], "validate_only": False}
    if key == 44:
        return {"resources": [{"resource_type": 2, "resource_name": GROW, "configs": [
            {"name": "segment.bytes", "config_operation": 0, "value": str(1 << 20)}]}], "validate_only": False}
    if key == 22:
        return {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    if key == 23:
        return {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]}
    if key == 27:  # a COMMIT marker of a producer of its own per version (no transaction open: nothing to close)
        return {"markers": [{"producer_id": 900 + version, "producer_epoch": 0, "transaction_result": True,
                             "topics": [{"name": TOPIC, "partition_indexes": [0]}], "coordinator_epoch": 0}]}
    if key == 61:
        return {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
    if key == 21:  # after Produce, Fetch and ListOffsets ran (cases run in key order)
        return {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout_ms": 5000}
    if key == 37:  # each version grows GROW by one more partition (versions run in order)
        return {"topics": [{"name": GROW, "count": 2 + version, "assignments": None}], "timeout_ms": 5000,
                "validate_only": False}
    if key == 43:
        return {"election_type": 0, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}], "timeout_ms": 5000}
    if key == 45:
        return {"timeout_ms": 5000, "allow_replication_factor_change": True,
                "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [1]}]}]}
    if key == 46:
        return {"timeout_ms": 5000, "topics": None}
    if key in (24, 25, 26, 28, 65):  # the transaction APIs: fields from txn_setup
        return {}
    if key == 66:
        return {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    group = f"{APIS[key].name}-v{version}"  # the group APIs: each version has a group of its own
    if key == 8:  # a commit without a generation (a group with no members takes it)
        return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
                "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 7 + version,
                                                           "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}
    if key == 9:
        return {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}], "require_stable": False}
    if key == 10:
        return {"key": group, "key_type": 0, "coordinator_keys": [group]}
    if key == 11:
        return {"group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"sub"}]}
    if key in (12, 13, 14):  # member_id, generation_id, assignments: from group_setup's JoinGroup
        return {"group_id": group}
    if key == 15:
        return {"groups": [group], "include_authorized_operations": False}
    if key == 16:
        return {"states_filter": []}
    raise AssertionError(key)


def join(c: RawClient, group: str) -> tuple[str, int]:
    """A member of `group` (JoinGroup v1: no MEMBER_ID_REQUIRED round): (member id, generation)."""
    req = make_message(APIS[11].request, 1, request_body(11, 1) | {"group_id": group})
    resp = c.request(req, APIS[11].response)
    assert resp.error_code == 0 and resp.leader == resp.member_id, resp
    return resp.member_id, resp.generation_id


def group_setup(c: RawClient, key: int, version: int) -> dict[str, Any]:
    """What a group request at this version needs in place first; its fields that depend on it."""
    group = f"{APIS[key].name}-v{version}"
    if key in (8, 9, 11, 12, 13, 14, 15, 16):  # as a client does: find the coordinator (this creates
        # __consumer_offsets the first time)
        find = make_message(APIS[10].request, 0, {"key": group})
        assert c.request(find, APIS[10].response).error_code == 0
    if key == 9:
        commit = make_message(APIS[8].request, 2, request_body(8, 2) | {"group_id": group})
        assert c.request(commit, APIS[8].response).topics[0].partitions[0].error_code == 0
    if key in (12, 13, 14, 15, 16):
        member, generation = join(c, group)
        fields: dict[str, Any] = {"member_id": member}
        if key == 13 and version >= 3:  # a batch of members (static ones may be named by instance)
            fields = {"members": [{"member_id": member, "group_instance_id": None}]}
        if key != 13:
            fields["generation_id"] = generation
        if key == 14:
            fields["assignments"] = [{"member_id": member, "assignment": b"mine"}]
        return fields
    return {}


def txn_setup(c: RawClient, key: int, version: int) -> dict[str, Any]:
    """A transactional id of this version's own, initialized (and with a transaction begun where the
    request ends or extends one): the request's fields."""
    tid = f"{APIS[key].name}-v{version}"
    find = make_message(APIS[10].request, 1, {"key": tid, "key_type": 1})
    assert c.request(find, APIS[10].response).error_code == 0
    init = c.request(make_message(APIS[22].request, 1, {"transactional_id": tid, "transaction_timeout_ms": 60000}),
                     APIS[22].response)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    if key in (26, 28):  # a transaction with a partition (EndTxn) or the group's offsets (TxnOffsetCommit)
        if key == 26:
            begin = make_message(APIS[24].request, 0, {"v3_and_below_transactional_id": tid,
                                                       "v3_and_below_producer_id": pid,
                                                       "v3_and_below_producer_epoch": epoch,
                                                       "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]})
            got = c.request(begin, APIS[24].response).results_by_topic_v3_and_below[0].results_by_partition[0]
            assert got.partition_error_code == 0
        else:
            offsets = make_message(APIS[25].request, 0, {"transactional_id": tid, "producer_id": pid,
                                                         "producer_epoch": epoch, "group_id": tid})
            assert c.request(offsets, APIS[25].response).error_code == 0
    if key == 24 and version >= 4:
        return {"transactions": [{"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                  "verify_only": True, "topics": [{"name": TOPIC, "partitions": [0]}]}]}
    if key == 24:
        return {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}
    if key == 25:
        return {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": tid}
    if key == 26:
        return {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    if key == 28:
        return {"transactional_id": tid, "group_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    return {"transactional_ids": [tid]}  # DescribeTransactions


def legacy_request(c: RawClient, key: int, version: int) -> Any:
    """Produce v0-2 and Fetch v0-3 through kafka-python's old classes (magic 1 message sets), answered
    in the shape of the current classes so the checks below apply."""
    import struct
    from types import SimpleNamespace

    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    def roundtrip(req: Any, resp_cls: Any) -> Any:
        payload = struct.pack(">hhih", key, version, 7, 3) + b"old" + req.encode()
        c.send_bytes(struct.pack(">i", len(payload)) + payload)
        frame = c.recv_frame()
        assert struct.unpack_from(">i", frame)[0] == 7
        return resp_cls.decode(frame[4:])

    if key == 0:
        b = LegacyRecordBatchBuilder(magic=min(version, 1), compression_type=0, batch_size=1 << 20)
        b.append(0, timestamp=None if version == 0 else 1_700_000_000_000, key=None, value=b"old%d" % version)
        req = legacy._request_cls(0, version)(acks=1, timeout_ms=5000,
                                               topic_data=[(TOPIC, [(0, bytes(b.build()))])])
        resp = roundtrip(req, legacy._response_cls(0, version))
        (name, [(index, err, base, *_)]) = resp.responses[0]
        return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[
            SimpleNamespace(error_code=err, base_offset=base)])])
    args: dict[str, Any] = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
                            "topics": [(TOPIC, [(0, 0, 1 << 20)])]}
    if version == 3:
        args["max_bytes"] = 1 << 20
    resp = roundtrip(legacy._request_cls(1, version)(**args), legacy._response_cls(1, version))
    (topic, [(p, err, hw, records)]) = resp.responses[0]
    from kafka.record.legacy_records import LegacyRecordBatch

    assert records and records[16] == (0 if version < 2 else 1), ("down-converted to the old format", err, hw)
    size = struct.unpack_from(">i", records, 8)[0]
    first = next(iter(LegacyRecordBatch(records[: 12 + size], records[16])))  # one message at a time
    assert first.offset == 0 and first.value == b"old0"
    return SimpleNamespace(responses=[SimpleNamespace(partitions=[
        SimpleNamespace(error_code=err, high_watermark=hw, records=records)])])


CASES = [(a.key, v) for a in APIS.values() for v in range(a.min_version, a.max_version + 1)]


@pytest.fixture(scope="module")
def vbroker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProc(tmp_path_factory.mktemp("versions") / "data",
                   overrides=["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=3"]).start()
    c = RawClient(b.bootstrap)
    create = make_message(APIS[19].request, 4, request_body(19, 4) | {
        "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
    assert c.request(create, APIS[19].response).topics[0].error_code == 0
    grow = make_message(APIS[19].request, 4, request_body(19, 4) | {
        "topics": [{"name": GROW, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
    assert c.request(grow, APIS[19].response).topics[0].error_code == 0
    for v in range(APIS[20].min_version, APIS[20].max_version + 1):
        doomed = make_message(APIS[19].request, 4, request_body(19, 4) | {"topics": [
            {"name": f"doomed-v{v}", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
        assert c.request(doomed, APIS[19].response).topics[0].error_code == 0
    c.close()
    yield b
    b.kill()


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{APIS[k].name}-v{v}" for k, v in CASES])
def test_every_advertised_version_round_trips(vbroker: BrokerProc, key: int, version: int) -> None:
    api = APIS[key]
    c = RawClient(vbroker.bootstrap)
    try:
        if legacy.is_legacy(key, version):
            resp = legacy_request(c, key, version)
        else:
            body = request_body(key, version)
            extra = group_setup(c, key, version)
            if key in (12, 13, 14):
                body |= extra
            if key in (24, 25, 26, 28, 65):
                body |= txn_setup(c, key, version)
            resp = c.request(make_message(api.request, version, body), api.response)
    finally:
        c.close()
    if key == 0:
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert resp.responses[0].partition_responses[0].base_offset >= 0
    elif key == 1:
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark >= 1 and part.records
    elif key == 2:
        assert resp.topics[0].partitions[0].error_code == 0 and resp.topics[0].partitions[0].offset >= 1
    elif key == 3:
        assert [t.name for t in resp.topics] == [TOPIC] and resp.topics[0].partitions[0].leader_id == 1
    elif key == 18:
        assert resp.error_code == 0 and {k.api_key for k in resp.api_keys} == set(APIS)
    elif key == 19:
        assert resp.topics[0].error_code == 0
    elif key == 20:
        assert resp.responses[0].error_code == 0 and resp.responses[0].name == f"doomed-v{version}"
    elif key == 22:
        assert resp.error_code == 0 and resp.producer_id >= 0
    elif key == 23:  # the only epoch, 0, ends at the log end
        part = resp.topics[0].partitions[0]
        assert part.error_code == 0 and part.leader_epoch == 0 and part.end_offset >= 1
    elif key == 27:
        assert resp.markers[0].producer_id == 900 + version and resp.markers[0].topics[0].partitions[0].error_code == 0
    elif key == 21:
        (part,) = resp.topics[0].partitions
        assert part.error_code == 0 and part.low_watermark == 1
    elif key == 61:  # WriteTxnMarkers' producers (900 + version) are known to the partition by now
        (part,) = resp.topics[0].partitions
        assert part.error_code == 0 and {p.producer_id for p in part.active_producers} >= {900, 901, 902}
    elif key == 24 and version >= 4:  # verify only: the partition is not in a transaction (nothing begun)
        (part,) = resp.results_by_transaction[0].topic_results[0].results_by_partition
        assert resp.error_code == 0 and part.partition_error_code == 120  # TRANSACTION_ABORTABLE
    elif key == 24:
        assert resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    elif key in (25, 26):
        assert resp.error_code == 0
        if key == 26 and version >= 5:  # KIP-890 part 2: the epoch comes back bumped
            assert resp.producer_epoch == 1 and resp.producer_id >= 0
    elif key == 28:
        assert resp.topics[0].partitions[0].error_code == 0
    elif key == 65:
        (st,) = resp.transaction_states
        assert st.error_code == 0 and st.transaction_state == "Empty" and st.producer_epoch == 0
    elif key == 66:
        assert resp.error_code == 0 and {"DescribeTransactions-v0", "EndTxn-v5"} <= {
            t.transactional_id for t in resp.transaction_states}
    elif key == 32:
        got = {c.name: c.value for c in resp.results[0].configs}
        assert resp.results[0].error_code == 0 and got["cleanup.policy"] == "delete"
    elif key in (33, 44):
        assert resp.responses[0].error_code == 0, resp.responses[0].error_message
    elif key == 37:
        assert resp.results[0].error_code == 0
    elif key == 43:  # one broker: its only replica already leads
        assert resp.replica_election_results[0].partition_result[0].error_code == 84  # ELECTION_NOT_NEEDED
    elif key == 45:
        assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
    elif key == 46:
        assert resp.error_code == 0 and list(resp.topics) == []
    elif key == 8:
        assert resp.topics[0].partitions[0].error_code == 0
    elif key == 9:  # what group_setup committed (OffsetCommit v2: offset 9)
        part = resp.topics[0].partitions[0]
        assert getattr(resp, "error_code", 0) == 0 and part.error_code == 0 and part.committed_offset == 9
    elif key == 10:
        found = resp.coordinators[0] if version >= 4 else resp
        assert found.error_code == 0 and found.node_id == 1 and found.port == vbroker.port
    elif key == 11:  # v4+: a new member is first told its id (KIP-394)
        if version >= 4:
            assert resp.error_code == 79 and resp.member_id
        else:
            assert resp.error_code == 0 and resp.generation_id == 1 and resp.leader == resp.member_id
    elif key == 12:
        assert resp.error_code == 0
    elif key == 13:
        assert resp.error_code == 0
        if version >= 3:
            assert [m.error_code for m in resp.members] == [0] and resp.members[0].member_id
    elif key == 14:
        assert resp.error_code == 0 and resp.assignment == b"mine"
    elif key == 15:
        (g,) = resp.groups
        assert g.error_code == 0 and g.group_state == "CompletingRebalance" and len(g.members) == 1
        assert g.members[0].member_metadata == b"sub"
    elif key == 16:
        assert resp.error_code == 0 and f"ListGroups-v{version}" in {g.group_id for g in resp.groups}


def test_unsupported_api_versions_version_gets_v0_error_and_our_ranges(vbroker: BrokerProc) -> None:
    """The protocol's fallback rule: a too-new ApiVersions gets a v0 response with UNSUPPORTED_VERSION."""
    c = RawClient(vbroker.bootstrap)
    try:
        req = ApiVersionsRequest(version=3, client_software_name="x", client_software_version="1")
        req.with_header(correlation_id=42, client_id="raw")
        raw = bytearray(req.encode(header=True, framed=True))
        raw[6:8] = (99).to_bytes(2, "big")  # claim version 99
        c.send_bytes(bytes(raw))
        resp = ApiVersionsResponse.decode(c.recv_frame(), version=0, header=True)
    finally:
        c.close()
    assert resp.header.correlation_id == 42
    assert resp.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}[18] == (0, 3)
