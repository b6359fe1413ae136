"""Which Kafka APIs a broker serves, asked as every client asks first (ApiVersions, key 18).

A workload names the Kafka features it needs (`kernel.system.FEATURES`); before its workers start,
the harness asks the brokers, and a broker that does not advertise, say, EndTxn refuses a
transactional run in one sentence, instead of a run whose every transaction fails as `info`.
Any Kafka-protocol broker answers this: it is how a client learns what it may send.
"""

from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from harness.db.wire import WireError, ask, connected

VERSION = 0  # every broker answers v0, and its response header is never flexible


def api_keys(address: str, timeout_s: float = 3.0) -> set[int] | str:
    """The API keys the broker at `address` advertises; a one-line reason if it did not answer."""
    try:
        with connected(address, timeout_s) as sock:
            resp = ask(sock, ApiVersionsRequest(version=VERSION), ApiVersionsResponse, VERSION)
    except WireError as e:
        return f"no answer ({type(e).__name__}: {e})"
    if resp.error_code:
        return f"error code {resp.error_code}"
    return {int(k.api_key) for k in resp.api_keys}
