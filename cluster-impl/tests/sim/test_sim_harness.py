"""The harness hooks of the simulator: names checked up front, a run stored as usual, exact replay."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.registry import build_test
from harness.run import run
from harness.run_cli import _replay_simulated
from kernel.errors import UsageError
from kernel.spec import build_spec


def test_the_simulator_acts_out_the_full_default_mix() -> None:
    from nemesis.registry import DEFAULT

    assert set(build_test(build_spec({"provisioner": "sim"})).spec.nemesis) == set(DEFAULT)


def test_determinism_checks_need_the_simulator() -> None:
    with pytest.raises(UsageError, match="needs --provisioner sim"):
        build_test(build_spec({"check_determinism": True}))


def test_a_run_with_a_shrunk_schedule_replays_byte_for_byte(tmp_path: Path) -> None:
    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 10.0, "rate": 50.0, "seed": 4,
                       "nemesis": "kill,partition", "nemesis_interval": 2.0, "store": str(tmp_path)})
    test = build_test(spec)
    faults = test.nemesis.plan(["n1", "n2", "n3"])
    shrunk = [replace(f, duration_s=1.0) for f in faults[:2]]
    out = run(test, progress=False, say=lambda _: None, faults=shrunk, check=False,
              extra_meta={"schedule_shrunk": True})
    meta = json.loads((out.run_dir / "test.json").read_text())
    assert meta["complete"] is True and [f["duration_s"] for f in meta["schedule"]] == [1.0, 1.0]
    again = _replay_simulated(out.run_dir, meta, spec, check=False)
    original = (out.run_dir / "history.jsonl").read_bytes()
    assert b'"f":"start-kill"' in original or b'"f":"start-partition"' in original
    assert (again.run_dir / "history.jsonl").read_bytes() == original
    assert sorted(p.name for p in (out.run_dir / "replicas").iterdir()) == ["n1", "n2", "n3"]


def test_check_determinism_names_the_first_differing_line(tmp_path: Path) -> None:
    from harness.determinism import Nondeterminism, check_determinism
    from harness.sim_search import simulate

    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 5.0, "rate": 50.0, "seed": 9,
                       "nemesis": "pause", "nemesis_interval": 2.0})
    run_dir, _ = simulate(spec, tmp_path / "first")
    history = run_dir / "history.jsonl"
    check_determinism(spec, history)  # the same bytes: no complaint
    lines = history.read_text().splitlines(keepends=True)
    lines[41] = lines[41].replace('"index":41', '"index":41 ')
    history.write_text("".join(lines))
    with pytest.raises(Nondeterminism, match="line 42 differs"):
        check_determinism(spec, history)
