"""`hanging-transaction`: our addition, from what the harness measured after the drain.

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
DEFINITION = ("A key whose last stable offset stayed below its high watermark once every fault was healed and "
              "every transaction had its timeout to end (`test.json` `hanging_transactions`): a transaction "
              "that is never completed, where read_committed consumers stall for good (KIP-664).")


def hanging_anomalies(test_json: dict[str, Any] | None, examples: int) -> dict[str, dict[str, Any]]:
    """{NAME: {count, examples}} when the run measured a hanging transaction, else {}."""
    got = (test_json or {}).get("hanging_transactions")
    if not got:
        return {}
    try:
        rows = sorted(({"key": int(k), "lso": int(v["lso"]), "hw": int(v["hw"])} for k, v in got.items()),
                      key=lambda r: r["key"])
    except (AttributeError, KeyError, TypeError, ValueError):
        raise HistoryError("test.json: hanging_transactions must map each key to its {\"lso\", \"hw\"} integers; "
                           "the run's measurement cannot be read") from None
    rows = [r for r in rows if r["lso"] < r["hw"]]
    return {NAME: {"count": len(rows), "examples": rows[:examples]}} if rows else {}
