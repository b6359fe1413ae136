"""Malformed and truncated frames: the broker answers or closes that connection, and keeps serving others."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from brokerlib import BrokerProc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from rawclient import RawClient, batch, produce_req

KNOWN_KEYS = [0, 1, 2, 3, 18, 19, 22]


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProc]:
    b = BrokerProc(tmp_path_factory.mktemp("fuzz") / "data").start()
    yield b
    b.kill()


def _healthy(b: BrokerProc) -> bool:
    c = RawClient(b.bootstrap, timeout=5)
    try:
        r = c.request(ApiVersionsRequest(version=3, client_software_name="ok", client_software_version="1"),
                      ApiVersionsResponse)
        return bool(r.error_code == 0)
    finally:
        c.close()


def _send_garbage(b: BrokerProc, payload: bytes) -> None:
    s = socket.create_connection(("127.0.0.1", b.port), timeout=2)
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass
    finally:
        s.close()


header = st.tuples(st.sampled_from(KNOWN_KEYS + [-1, 7, 999]), st.integers(-2, 40), st.integers(-(2**31), 2**31 - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=header, body=st.binary(max_size=300), size_delta=st.integers(-8, 8), truncate=st.booleans())
def test_malformed_frames_never_take_the_broker_down(fuzz_broker: BrokerProc, head: tuple[int, int, int],
                                                     body: bytes, size_delta: int, truncate: bool) -> None:
    payload = struct.pack(">hhi", *head) + body
    frame = struct.pack(">i", len(payload) + size_delta) + payload
    if truncate:
        frame = frame[: max(1, len(frame) // 2)]
    _send_garbage(fuzz_broker, frame)
    assert fuzz_broker.alive()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flip=st.integers(0, 200), value=st.binary(min_size=1, max_size=50))
def test_bit_flipped_produce_requests(fuzz_broker: BrokerProc, flip: int, value: bytes) -> None:
    req = produce_req("fuzzed", 0, batch([value]))
    req.with_header(correlation_id=1, client_id="fuzz")
    raw = bytearray(req.encode(header=True, framed=True))
    raw[4 + flip % (len(raw) - 4)] ^= 0x5A
    _send_garbage(fuzz_broker, bytes(raw))
    assert fuzz_broker.alive()


def test_oversized_frame_closes_connection_and_others_are_served(fuzz_broker: BrokerProc) -> None:
    _send_garbage(fuzz_broker, struct.pack(">i", 2**31 - 1) + b"\x00" * 16)
    _send_garbage(fuzz_broker, struct.pack(">i", -5))
    assert _healthy(fuzz_broker)


def test_still_serving_after_the_fuzzing(fuzz_broker: BrokerProc) -> None:
    assert _healthy(fuzz_broker)
    log = fuzz_broker.log_text()
    assert "closing connection" in log, "malformed frames must have been seen and refused"
    assert "internal error" not in log, "every malformed frame is a protocol violation, never a broker bug"
