"""A simulated scenario per coverage probe (`logbroker/probes.py`): each probe named in `SIM_PROBES` is
hit by its scenario — a seed of a nemesis mix through the harness's one pipeline, or the transaction
run — read from the `probes.json` files the collect phase stores, as a run's coverage is. Every probe
is shown somewhere: here, or by a process-level scenario (`tests/unit/test_probe_scenarios.py`,
`tests/test_probe_scenarios_core.py`) where the simulator's mixes do not reach it."""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from logbroker import probes
from logsim.txn_run import run as txn_run

from harness.sim_search import simulate
from kernel.spec import build_spec

TESTS = Path(__file__).resolve().parents[1]

#: scenario -> the run: harness spec settings, or "txn" (`logsim/txn_run.py`, the coordinator cut off)
SCENARIOS: dict[str, dict[str, Any] | str] = {
    "default-mix": {"seed": 1},
    "subscribe-mix": {"seed": 2, "time_limit": 60.0, "nemesis_interval": 5.0, "sub_via": ["subscribe"]},
    "min-insync-3-lagging": {"seed": 21, "min_insync": 3, "nemesis": ["lagging-follower"], "nemesis_interval": 4.0},
    "lost-disk-in-isr": {"seed": 31, "bugs": ["lost-disk-in-isr"], "nemesis": ["disk-loss-last-isr"],
                         "nemesis_interval": 4.0, "max_active": 1},
    "txn-coordinator-cut-off": "txn",
}

#: probe -> the scenario that hits it
SIM_PROBES: dict[str, str] = {
    "alter-isr-controller-unavailable": "subscribe-mix",
    "alter-isr-moot": "min-insync-3-lagging",
    "alter-isr-stale-broker-epoch": "subscribe-mix",
    "broker-bounce-detected": "subscribe-mix",
    "broker-starts-without-its-data": "default-mix",
    "controller-failover": "subscribe-mix",
    "fetch-fenced-leader-epoch": "default-mix",
    "fetch-offset-out-of-range": "lost-disk-in-isr",
    "fetch-session-refused": "subscribe-mix",
    "follower-fetch-partition-error": "default-mix",
    "follower-fetches-beyond-leader-leo": "lost-disk-in-isr",
    "follower-truncates-uncommitted-tail": "default-mix",
    "isr-below-min-insync": "min-insync-3-lagging",
    "isr-below-min-insync-with-produce-waiting": "min-insync-3-lagging",
    "isr-expand-proposed": "default-mix",
    "isr-shrink-proposed": "subscribe-mix",
    "isr-shrink-with-produce-waiting": "subscribe-mix",
    "leader-elected-after-lagging-follow": "subscribe-mix",
    "leader-elected-hw-below-leo": "default-mix",
    "leader-elected-sole-isr": "default-mix",
    "partition-offline-with-live-laggard": "lost-disk-in-isr",
    "produce-duplicate-batch": "default-mix",
    "produce-out-of-order-sequence": "subscribe-mix",
    "produce-refused-not-enough-replicas": "default-mix",
    "produce-timed-out-in-purgatory": "default-mix",
    "produce-waiting-leadership-moved": "default-mix",
    "truncation-leader-knows-no-epoch": "lost-disk-in-isr",
    "truncation-request-failed": "default-mix",
    "txn-coordinator-loads-prepared": "txn-coordinator-cut-off",
    "txn-coordinator-unloads-with-markers-pending": "txn-coordinator-cut-off",
    "txn-marker-leader-lost": "txn-coordinator-cut-off",
    "txn-write-opens-transaction": "txn-coordinator-cut-off",
}


#: probes no scenario reaches yet, each with why: a debt the coverage report shows as "never hit"
WITHOUT_SCENARIO: dict[str, str] = {
    "produce-isr-shrank-after-append":
        "since the strict min ISR rule (KAFKA-15583) HW does not advance under min.insync.replicas, so only a "
        "produce request spanning several partitions, one of whose ISR shrank after its HW passed the batch "
        "while another partition still waited, answers NOT_ENOUGH_REPLICAS_AFTER_APPEND; no scenario builds one",
}
#: the transaction run's seed: its coordinator is cut off while markers are pending, and a marker's
#: leader changes (seed 1 hit `txn-marker-leader-lost` only through a same-leader epoch bump, which
#: no longer loses a marker: core/txn_markers.py)
TXN_SEED = 11


@cache
def hits(scenario: str, tmp: Path) -> dict[str, int]:
    """The probes a scenario hit, summed over its nodes' probes.json (simulated once per session)."""
    how = SCENARIOS[scenario]
    if how == "txn":
        out = tmp / scenario
        txn_run(TXN_SEED, out, txns=25, isolate=True)
        files = out.glob("replicas/*/probes.json")
    else:
        assert isinstance(how, dict)
        spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 30.0, "rate": 20.0, **how})
        run_dir, _ = simulate(spec, tmp / scenario)
        files = run_dir.glob("replicas/*/probes.json")
    return probes.merge(json.loads(f.read_text())["counts"] for f in files)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("probes")


@pytest.mark.parametrize("probe", sorted(SIM_PROBES))
def test_a_simulated_scenario_hits_the_probe(probe: str, scratch: Path) -> None:
    got = hits(SIM_PROBES[probe], scratch)
    assert got.get(probe, 0) > 0, f"{SIM_PROBES[probe]} hit only {sorted(got)}"


def _scenarios_of(path: Path, name: str) -> set[str]:
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"probe_scenarios_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return set(getattr(mod, name))
    finally:
        sys.path.remove(str(path.parent))


def test_every_probe_has_a_scenario() -> None:
    shown = set(SIM_PROBES) | _scenarios_of(TESTS / "unit" / "test_probe_scenarios.py", "PROCESS_SCENARIOS") \
        | _scenarios_of(TESTS / "test_probe_scenarios_core.py", "SCENARIOS")
    assert sorted(set(probes.PROBES) - shown - set(WITHOUT_SCENARIO)) == []
    assert not shown & set(WITHOUT_SCENARIO), "a probe with a scenario is no longer a debt"
