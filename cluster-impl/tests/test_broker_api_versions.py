"""Every API version we advertise answers a well-formed request through the real server.

Requests are built with kafka-python's classes at each version; the response must decode at that
version and make sense. This is what keeps our ApiVersions answer honest.
"""

from __future__ import annotations

from typing import Any

import pytest
from brokerlib import BrokerProc
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
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
    if key == 22:
        return {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
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
    raise AssertionError(key)


CASES = [(a.key, v) for a in APIS.values() for v in range(a.min_version, a.max_version + 1)]


@pytest.fixture(scope="module")
def vbroker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProc(tmp_path_factory.mktemp("versions") / "data").start()
    c = RawClient(b.bootstrap)
    create = make_message(APIS[19].request, 4, request_body(19, 4) | {
        "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
    assert c.request(create, APIS[19].response).topics[0].error_code == 0
    grow = make_message(APIS[19].request, 4, request_body(19, 4) | {
        "topics": [{"name": GROW, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
    assert c.request(grow, APIS[19].response).topics[0].error_code == 0
    c.close()
    yield b
    b.kill()


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{APIS[k].name}-v{v}" for k, v in CASES])
def test_every_advertised_version_round_trips(vbroker: BrokerProc, key: int, version: int) -> None:
    api = APIS[key]
    c = RawClient(vbroker.bootstrap)
    try:
        resp = c.request(make_message(api.request, version, request_body(key, version)), api.response)
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
    elif key == 22:
        assert resp.error_code == 0 and resp.producer_id >= 0
    elif key == 37:
        assert resp.results[0].error_code == 0
    elif key == 43:  # one broker: its only replica already leads
        assert resp.replica_election_results[0].partition_result[0].error_code == 84  # ELECTION_NOT_NEEDED
    elif key == 45:
        assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
    elif key == 46:
        assert resp.error_code == 0 and list(resp.topics) == []


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
