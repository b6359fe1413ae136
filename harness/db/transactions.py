"""The transactions a broker coordinates that are not finished, asked as `kafka-transactions.sh list`
does (ListTransactions, filtered to Ongoing/PrepareCommit/PrepareAbort). A transactional id left in a
Prepare state after its coordinator moved never gets its markers or its end (KAFKA-16352): its
producer is told CONCURRENT_TRANSACTIONS for good, even where no partition's LSO shows it."""

from __future__ import annotations

from kafka.protocol.admin.transactions import ListTransactionsRequest, ListTransactionsResponse

from harness.db.wire import WireError, ask, connected
from kernel.db import OPEN_TXN_STATES


def open_transactions(address: str, timeout_s: float = 3.0) -> dict[str, str]:
    """Transactional id -> state of the unfinished transactions the broker at `address` coordinates; {}
    when it does not answer (a broker that is down coordinates nothing clients can reach)."""
    req = ListTransactionsRequest(version=0, state_filters=list(OPEN_TXN_STATES), producer_id_filters=[])
    try:
        with connected(address, timeout_s) as sock:
            resp = ask(sock, req, ListTransactionsResponse, 0)
    except WireError:
        return {}
    return {str(t.transactional_id): str(t.transaction_state) for t in resp.transaction_states}
