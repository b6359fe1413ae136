"""`hanging-transaction`: our addition, from what the harness measured before the drain.

A partition whose last stable offset stayed below its high watermark after every fault was healed
and every transaction had its timeout (and the coordinator's abort scan) to end (`harness.hanging`,
test.json `hanging_transactions`): a transaction nobody will ever complete, at which read_committed
consumers stall for good (KIP-664). No history can show it — the read_committed drain stops at the
LSO, and what lies past it is what nobody can read — so the check takes the measurement from the
run's own test.json, and names the key with its LSO and HW.
"""

from __future__ import annotations

from typing import Any

from kernel.errors import HistoryError

NAME = "hanging-transaction"
DEFINITION = ("A key whose last stable offset stayed below its high watermark, or a transactional id still "
              "Ongoing or in PrepareCommit/PrepareAbort, once every fault was healed and every transaction had its "
              "timeout to end (`test.json` `hanging_transactions`): a transaction that is never completed, where "
              "read_committed consumers stall for good (KIP-664) or its producer is refused for good (KAFKA-16352).")

_MALFORMED = ("test.json: hanging_transactions must hold \"partitions\" (each key's {\"lso\", \"hw\"} integers) and "
              "\"transactions\" (each transactional id's state); the run's measurement cannot be read")


def hanging_anomalies(test_json: dict[str, Any] | None, examples: int) -> dict[str, dict[str, Any]]:
    """{NAME: {count, examples}} when the run measured a hanging transaction, else {}: one example per
    key ({key, lso, hw}) and per transactional id ({transactional_id, state})."""
    got = (test_json or {}).get("hanging_transactions")
    if not got:
        return {}
    try:
        keys = sorted(({"key": int(k), "lso": int(v["lso"]), "hw": int(v["hw"])}
                       for k, v in got.get("partitions", {}).items()), key=lambda r: r["key"])
        raw = got.get("transactions", {})
        if set(got) - {"partitions", "transactions"} or not all(isinstance(v, str) for v in raw.values()):
            raise ValueError
        tids = [{"transactional_id": str(t), "state": state} for t, state in sorted(raw.items())]
    except (AttributeError, KeyError, TypeError, ValueError):
        raise HistoryError(_MALFORMED) from None
    rows: list[dict[str, Any]] = [r for r in keys if r["lso"] < r["hw"]]
    rows += tids
    return {NAME: {"count": len(rows), "examples": rows[:examples]}} if rows else {}
