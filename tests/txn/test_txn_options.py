"""The transactional workload's settings: one readable sentence (exit 3) for what cannot run."""

from __future__ import annotations

import pytest

from harness.registry import preflight
from kernel.errors import UsageError
from kernel.spec import build_spec
from tests.conftest import run_chaos


def test_ctp_needs_the_txn_workload_and_subscribe() -> None:
    with pytest.raises(UsageError, match="needs --workload txn and --sub-via subscribe"):
        build_spec({"workload": "txn", "txn_mode": "ctp"})
    with pytest.raises(UsageError, match="needs --workload txn"):
        build_spec({"workload": "queue", "txn_mode": "ctp", "sub_via": "subscribe"})
    with pytest.raises(UsageError, match="txn-mode must be plain or ctp"):
        build_spec({"workload": "txn", "txn_mode": "eos"})


def test_ctp_is_refused_on_the_simulator() -> None:
    spec = build_spec({"workload": "txn", "txn_mode": "ctp", "sub_via": "subscribe", "provisioner": "sim"})
    with pytest.raises(UsageError, match="containers only"):
        preflight(spec)


def test_txn_flag_conflicts_with_another_workload() -> None:
    res = run_chaos("run", "--txn", "--workload", "queue", "--provisioner", "sim", "--no-progress")
    assert res.returncode == 3 and "--txn is the txn workload" in res.stderr
