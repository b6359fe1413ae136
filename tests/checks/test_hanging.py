"""`hanging-transaction` comes from the harness's measurement in test.json (`results/hanging.py`): read
strictly, a malformed measurement is an error naming the field, never a silent pass."""

from __future__ import annotations

import pytest

from kernel.errors import HistoryError
from results.hanging import NAME, hanging_anomalies


def test_open_keys_are_named_with_their_ends() -> None:
    got = hanging_anomalies({"hanging_transactions": {"2": {"lso": 5, "hw": 9}, "0": {"lso": 1, "hw": 3}}}, 10)
    assert got == {NAME: {"count": 2, "examples": [{"key": 0, "lso": 1, "hw": 3}, {"key": 2, "lso": 5, "hw": 9}]}}
    assert hanging_anomalies({"hanging_transactions": {"0": {"lso": 1, "hw": 3}}}, 0)[NAME]["count"] == 1


@pytest.mark.parametrize("test_json", [None, {}, {"hanging_transactions": {}},
                                       {"hanging_transactions": {"0": {"lso": 3, "hw": 3}}}])
def test_nothing_open_is_nothing(test_json: dict | None) -> None:
    assert hanging_anomalies(test_json, 10) == {}


@pytest.mark.parametrize("bad", [{"0": "x"}, {"0": {"lso": 1}}, {"a": {"lso": 1, "hw": 2}}, ["0"],
                                 {"0": {"lso": "one", "hw": 2}}])
def test_a_malformed_measurement_is_refused(bad: object) -> None:
    with pytest.raises(HistoryError, match="hanging_transactions"):
        hanging_anomalies({"hanging_transactions": bad}, 10)
