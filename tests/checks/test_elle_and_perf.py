"""elle-cli export against a golden file in elle-cli's documented list-append JSON form; the real
elle-cli when installed; the performance facts a plot reads."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from results.check import check_run
from results.elle import export_list_append, parse_elle_output, run_elle

HERE = Path(__file__).resolve().parent
GOLDEN_HISTORY = HERE / "corpus" / "valid-basic" / "history.jsonl"
GOLDEN = HERE / "golden" / "valid-basic.elle.json"


def test_export_matches_golden_file() -> None:
    """Sends are appends; a poll from offset 0 is a read of the prefix, its invoke reads `null`."""
    got = export_list_append(GOLDEN_HISTORY)
    assert got == json.loads(GOLDEN.read_text())
    for op in got:
        assert set(op) == {"index", "type", "f", "process", "value"}
        for m in op["value"]:
            assert m[0] in ("append", "r") and isinstance(m[1], int)
            if m[0] == "r":
                assert (m[2] is None) == (op["type"] == "invoke")
    assert [op["index"] for op in got] == list(range(len(got)))


def test_elle_verdict_parsing() -> None:
    assert parse_elle_output("h.json\ttrue\n", 0).status == "valid"
    assert parse_elle_output("h.json\tfalse\n", 1).status == "invalid"
    assert parse_elle_output("h.json\t:unknown\n", 0).status == "unknown"


def test_without_elle_cli_the_check_is_skipped_never_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ELLE_CLI", raising=False)
    r = run_elle(GOLDEN_HISTORY, tmp_path)
    assert r.status == "skipped" and r.status != "valid"


@pytest.mark.skipif(
    not os.environ.get("ELLE_CLI"),
    reason="ELLE_CLI is not set: no elle-cli installed here (it is a Clojure jar; see results/README.md)",
)
def test_real_elle_cli_accepts_a_valid_history(tmp_path: Path) -> None:
    r = run_elle(GOLDEN_HISTORY, tmp_path)
    assert r.status == "valid", r.output


@pytest.mark.spark
def test_perf_facts_from_a_history_with_a_fault_window(spark: Any, tmp_path: Path) -> None:
    import pandas as pd

    run = tmp_path / "run"
    shutil.copytree(HERE / "corpus" / "valid-basic", run)
    lines = (run / "history.jsonl").read_text().splitlines()
    ops = [json.loads(x) for x in lines]
    n = len(ops)
    start = {
        "index": n,
        "time": ops[3]["time"] + 1,
        "process": "nemesis",
        "type": "info",
        "f": "start-partition",
        "value": {"n1": ["n2"]},
    }
    # renumber: insert the nemesis ops in time order, after op 3 and after op 5
    stop = {
        "index": n + 1,
        "time": ops[5]["time"] + 1,
        "process": "nemesis",
        "type": "info",
        "f": "stop-partition",
        "value": None,
    }
    merged = sorted([*ops, start, stop], key=lambda d: d["time"])
    for i, d in enumerate(merged):
        d["index"] = i
    (run / "history.jsonl").write_text("".join(json.dumps(d) + "\n" for d in merged))
    r = check_run(run, spark_master="local[2]")
    assert r.valid is True
    lat = pd.read_parquet(run / "perf" / "latency.parquet")
    assert len(lat) == sum(1 for d in ops if d["type"] != "invoke") and (lat["latency_ms"] > 0).all()
    avail = pd.read_parquet(run / "perf" / "availability.parquet")
    assert avail["availability"].between(0, 1).all()
    faults = json.loads((run / "perf" / "faults.json").read_text())
    assert len(faults) == 1 and faults[0]["family"] == "partition"
    assert faults[0]["recovery_s"] is not None and faults[0]["recovery_s"] > 0
    assert r.perf["fault_windows"] == 1
