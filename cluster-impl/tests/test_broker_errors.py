"""Errors the protocol's way, seen through a raw client."""

from __future__ import annotations

from brokerlib import BrokerProc
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceResponse
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from rawclient import RawClient, batch, produce_req


def _create(c: RawClient, topic: str, partitions: int = 1, rf: int = 1) -> int:
    req = make_message(CreateTopicsRequest, 4, {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                    "configs": []}], "timeout_ms": 5000, "validate_only": False})
    return int(c.request(req, CreateTopicsResponse).topics[0].error_code)


def _fetch(c: RawClient, topic: str, offset: int) -> object:
    req = make_message(FetchRequest, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 20}]}]})
    return c.request(req, FetchResponse).responses[0].partitions[0]


def test_unknown_topic_offset_out_of_range_bad_crc_and_topic_errors(broker: BrokerProc) -> None:
    c = RawClient(broker.bootstrap)
    try:
        r = c.request(produce_req("nope", 0, batch([b"x"])), ProduceResponse)
        assert r.responses[0].partition_responses[0].error_code == Err.UNKNOWN_TOPIC_OR_PARTITION

        assert _create(c, "e") == Err.NONE
        assert _create(c, "e") == Err.TOPIC_ALREADY_EXISTS
        assert _create(c, "bad/name") == Err.INVALID_TOPIC_EXCEPTION
        assert _create(c, "rf3", rf=3) == Err.INVALID_REPLICATION_FACTOR  # one broker holds one replica

        good = batch([b"1", b"2"])
        assert c.request(produce_req("e", 0, good), ProduceResponse).responses[0].partition_responses[0].error_code == 0
        corrupt = bytearray(batch([b"3"]))
        corrupt[-1] ^= 0xFF  # flip a bit inside the CRC-covered records
        r = c.request(produce_req("e", 0, bytes(corrupt)), ProduceResponse)
        assert r.responses[0].partition_responses[0].error_code == Err.CORRUPT_MESSAGE

        part = _fetch(c, "e", 0)
        assert part.error_code == 0 and part.high_watermark == 2  # the corrupt batch appended nothing
        assert _fetch(c, "e", 3).error_code == Err.OFFSET_OUT_OF_RANGE
        assert _fetch(c, "e", 2).error_code == 0  # the log end itself is a valid, empty position
    finally:
        c.close()
    assert broker.alive()
