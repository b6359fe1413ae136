"""One Kafka request and its response over a plain socket, from the control host.

The harness asks brokers a few things no client library exposes as it needs them (a replica's log
end, each broker's own Metadata answer, ListTransactions on every broker); each is one framed request
and one framed response. A broker that does not answer is a `WireError`, which callers turn into
"no answer" rather than a failed run.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: what a broker that is down, cut off or answering garbage raises here
WireError = (OSError, ValueError, struct.error)


@contextmanager
def connected(address: str, timeout_s: float = 3.0) -> Iterator[socket.socket]:
    """A connection to `address` (host:port), closed after the block."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        yield sock


def ask(sock: socket.socket, req: Any, response_cls: Any, version: int, corr: int = 1) -> Any:
    """Send `req` (a kafka-python request at `version`) and decode its response."""
    req.with_header(correlation_id=corr, client_id="chaos-harness")
    sock.sendall(bytes(req.encode(header=True, framed=True)))
    size = struct.unpack(">i", exact(sock, 4))[0]
    return response_cls.decode(exact(sock, size), version=version, header=True)


def exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return buf
