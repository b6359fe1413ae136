"""The transactions a broker coordinates that are not finished, asked as `kafka-transactions.sh list`
does (ListTransactions, filtered to Ongoing/PrepareCommit/PrepareAbort). A transactional id left in a
Prepare state after its coordinator moved never gets its markers or its end (KAFKA-16352): its
producer is told CONCURRENT_TRANSACTIONS for good, even where no partition's LSO shows it."""

from __future__ import annotations

import socket
import struct

from kafka.protocol.admin.transactions import ListTransactionsRequest, ListTransactionsResponse

from harness.db.offsets import exact
from kernel.db import OPEN_TXN_STATES


def open_transactions(address: str, timeout_s: float = 3.0) -> dict[str, str]:
    """Transactional id -> state of the unfinished transactions the broker at `address` coordinates; {}
    when it does not answer (a broker that is down coordinates nothing clients can reach)."""
    host, port = address.rsplit(":", 1)
    req = ListTransactionsRequest(version=0, state_filters=list(OPEN_TXN_STATES), producer_id_filters=[])
    req.with_header(correlation_id=1, client_id="chaos-diagnosis")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.sendall(bytes(req.encode(header=True, framed=True)))
            size = struct.unpack(">i", exact(sock, 4))[0]
            resp = ListTransactionsResponse.decode(exact(sock, size), version=0, header=True)
    except (OSError, ValueError, struct.error):
        return {}
    return {str(t.transactional_id): str(t.transaction_state) for t in resp.transaction_states}
