"""`hanging-transaction` comes from the harness's measurement in test.json (`results/hanging.py`): read
strictly, a malformed measurement is an error naming the field, never a silent pass."""

from __future__ import annotations

import pytest

from kernel.errors import HistoryError
from results.hanging import NAME, hanging_anomalies


def test_open_keys_and_transactions_are_named() -> None:
    got = hanging_anomalies({"hanging_transactions": {
        "partitions": {"2": {"lso": 5, "hw": 9}, "0": {"lso": 1, "hw": 3}},
        "transactions": {"t-1": "PrepareCommit"}}}, 10)
    assert got == {NAME: {"count": 3, "examples": [{"key": 0, "lso": 1, "hw": 3}, {"key": 2, "lso": 5, "hw": 9},
                                                   {"transactional_id": "t-1", "state": "PrepareCommit"}]}}
    one = {"hanging_transactions": {"partitions": {}, "transactions": {"t": "Ongoing"}}}
    assert hanging_anomalies(one, 0)[NAME] == {"count": 1, "examples": []}


@pytest.mark.parametrize("test_json", [None, {}, {"hanging_transactions": {}},
                                       {"hanging_transactions": {"partitions": {"0": {"lso": 3, "hw": 3}},
                                                                 "transactions": {}}}])
def test_nothing_open_is_nothing(test_json: dict | None) -> None:
    assert hanging_anomalies(test_json, 10) == {}


@pytest.mark.parametrize("bad", [{"partitions": {"0": "x"}}, {"partitions": {"0": {"lso": 1}}},
                                 {"partitions": {"a": {"lso": 1, "hw": 2}}}, ["0"], {"0": {"lso": 1, "hw": 2}},
                                 {"partitions": {"0": {"lso": "one", "hw": 2}}}, {"transactions": ["t"]},
                                 {"transactions": {"t": 3}}])
def test_a_malformed_measurement_is_refused(bad: object) -> None:
    with pytest.raises(HistoryError, match="hanging_transactions"):
        hanging_anomalies({"hanging_transactions": bad}, 10)
