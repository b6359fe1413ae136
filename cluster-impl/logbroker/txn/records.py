"""Where a transactional id lives and what its records in `__transaction_state` look like.

The partition follows Kafka (and the group rule of `group/records.py`): `abs(javaHash(id)) % n` with
n = `transaction.state.log.num.partitions`, so partition leaders asking a coordinator for KIP-890
verification (`core/txn_verify.py`) find the same broker. The records are ours, compact JSON as the
group coordinator's: key `{"k": "txn", "id"}`, value `TxnMeta.to_record()`; the last record of an id
wins. Nothing else reads this topic.
"""

from __future__ import annotations

import json
from typing import Any

from logbroker.core.txn_verify import TXN_TOPIC
from logbroker.group.records import partition_for
from logbroker.txn.state import TxnMeta

__all__ = ["TXN_TOPIC", "decode", "partition_for", "txn_record"]


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def txn_record(m: TxnMeta) -> tuple[bytes, bytes]:
    return _dump({"k": "txn", "id": m.transactional_id}), _dump(m.to_record())


def decode(key: bytes | None, value: bytes | None) -> TxnMeta | None:
    """A record's state; None for a record of a kind we do not know (skipped, so a newer kind does
    not stop a load)."""
    if key is None or value is None:
        return None
    k = json.loads(key)
    if k.get("k") != "txn":
        return None
    return TxnMeta.from_record(str(k["id"]), json.loads(value))
