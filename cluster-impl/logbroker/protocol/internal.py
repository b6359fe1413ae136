"""The inter-broker control messages that the Kafka wire protocol subset we decode lacks.

kafka-python's codec has no LeaderAndIsr, UpdateMetadata, AlterPartition or OffsetForLeaderEpoch
classes, so these travel as one private API key on the same port: a normal v1 request header
(api key 32000, version 0, correlation id, client id) followed by a JSON body with a `type`; the
response is the correlation id and a JSON body. Follower fetches use the real Fetch API.
"""

from __future__ import annotations

import json
import struct
from typing import Any

INTERNAL_KEY = 32000
_CLIENT = b"logbroker"


def encode_request(correlation_id: int, body: dict[str, Any]) -> bytes:
    payload = struct.pack(">hhih", INTERNAL_KEY, 0, correlation_id, len(_CLIENT)) + _CLIENT + json.dumps(body).encode()
    return struct.pack(">i", len(payload)) + payload


def decode_request(frame: bytes) -> dict[str, Any]:
    (client_len,) = struct.unpack_from(">h", frame, 8)
    body = json.loads(frame[10 + max(client_len, 0) :])
    if not isinstance(body, dict) or "type" not in body:
        raise ValueError("internal request without a type")
    return body


def encode_response(correlation_id: int, body: dict[str, Any]) -> bytes:
    payload = struct.pack(">i", correlation_id) + json.dumps(body).encode()
    return struct.pack(">i", len(payload)) + payload


def decode_response(frame: bytes) -> tuple[int, dict[str, Any]]:
    (corr,) = struct.unpack_from(">i", frame, 0)
    return corr, json.loads(frame[4:])
