"""Connections that stall or send what cannot be decoded: idle timeout, the request memory budget,
and INVALID_REQUEST for an ApiVersions body that does not decode (server.py)."""

from __future__ import annotations

import socket
import struct
import time

from brokerlib import BrokerProc
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from rawclient import RawClient

MB = 1 << 20


def closed_by_broker(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def api_versions_frame(corr: int) -> bytes:
    req = ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1")
    req.with_header(correlation_id=corr, client_id="t")
    return bytes(req.encode(header=True, framed=True))


def test_idle_and_half_sent_connections_are_closed(broker_factory: type) -> None:
    b = broker_factory(overrides=["connections.max.idle.ms=1000"]).start()  # type: ignore[attr-defined]
    silent = socket.create_connection(("127.0.0.1", b.port))
    half = socket.create_connection(("127.0.0.1", b.port))
    half.sendall(struct.pack(">i", 10 * MB) + b"x" * MB)  # a frame that never completes
    busy = RawClient(b.bootstrap)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # requests every 200 ms keep a connection alive
        assert busy.request(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"),
                            ApiVersionsResponse).error_code == 0
        time.sleep(0.2)
    assert closed_by_broker(silent, within=5)
    assert closed_by_broker(half, within=5)
    assert busy.request(ApiVersionsRequest(version=0), ApiVersionsResponse).error_code == 0
    busy.close()


def test_request_memory_is_bounded_broker_wide(broker_factory: type) -> None:
    """A frame that does not fit into what is left of queued.max.request.bytes waits, unread, until
    the bytes are released: three unfinished 100 MB frames can no longer take 300 MB."""
    b = broker_factory(overrides=[f"socket.request.max.bytes={4 * MB}", f"queued.max.request.bytes={4 * MB}",
                                  "connections.max.idle.ms=60000"]).start()  # type: ignore[attr-defined]
    hog = socket.create_connection(("127.0.0.1", b.port))
    hog.sendall(struct.pack(">i", 4 * MB) + b"x" * MB)  # reserves the whole budget
    time.sleep(0.5)
    waiter = socket.create_connection(("127.0.0.1", b.port))
    waiter.sendall(api_versions_frame(1))
    waiter.settimeout(1.0)
    try:
        got = waiter.recv(4)
    except TimeoutError:
        got = b""
    assert got == b"", "answered while another connection held the whole budget"
    hog.close()
    waiter.settimeout(10)
    size = struct.unpack(">i", waiter.recv(4))[0]
    assert size > 0, "served once the budget was released"
    waiter.close()


def test_undecodable_api_versions_is_answered_invalid_request(broker: BrokerProc) -> None:
    client = b"raw"
    payload = struct.pack(">hhih", 18, 3, 77, len(client)) + client + b"\x07garbage\xff\xff\xff"
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    s.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", s.recv(4))[0]
    frame = b""
    while len(frame) < size:
        frame += s.recv(size - len(frame))
    resp = ApiVersionsResponse.decode(frame, version=0, header=True)
    assert resp.header.correlation_id == 77 and resp.error_code == 42  # INVALID_REQUEST
    assert any(k.api_key == 0 for k in resp.api_keys), "with our ranges, as for an unsupported version"
    s.sendall(api_versions_frame(78))  # and the connection goes on
    assert struct.unpack(">i", s.recv(4))[0] > 0
    s.close()
    assert "Traceback" not in broker.log_text()
