"""A minimal raw Kafka client for tests: send one request (kafka-python's classes), read one response."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from logbroker.protocol.apis import make_message


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.corr = 0

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._exact(4))[0]
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return buf

    def request(self, req: Any, response_cls: Any) -> Any:
        self.corr += 1
        req.with_header(correlation_id=self.corr, client_id="raw")
        self.send_bytes(bytes(req.encode(header=True, framed=True)))
        if not req.expect_response():
            return None
        frame = self.recv_frame()
        resp = response_cls.decode(frame, version=req.API_VERSION, header=True)
        assert resp.header.correlation_id == self.corr
        return resp

    def close(self) -> None:
        self.sock.close()


def batch(values: list[bytes], *, producer_id: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=None, key=None, value=v, headers=[])
    return bytes(b.build())


def produce_req(topic: str, partition: int, records: bytes, *, acks: int = 1, version: int = 7,
                timeout_ms: int = 5000) -> Any:
    return make_message(ProduceRequest, version, {
        "transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
