"""The detection matrix's bookkeeping (harness/detect.py), driven by a scripted runner.

The real matrix runs containers (`make bench-detect`); this checks what it concludes from outcomes:
only loss or divergence counts as catching a switch, detection stops at the first catch unless every
seed is asked for, mixes alternate, and the baseline gets as many runs as the switches used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.detect import TARGETED, detect, table
from kernel.spec import RunSpec


def _scripted(outcomes: dict[tuple[str, int], list[str]]) -> Any:
    calls: list[RunSpec] = []

    def run_one(spec: RunSpec) -> tuple[int, Any, list[str], list[str], Path | None]:
        calls.append(spec)
        bad = outcomes.get((spec.bugs[0] if spec.bugs else "-", spec.seed), [])
        return (1 if bad else 0), (not bad), [*bad, "int-send-skip"], bad, None

    return run_one, calls


def test_stops_at_the_first_catch_and_counts_only_loss_or_divergence() -> None:
    run_one, calls = _scripted({("truncate-to-hw", 11): ["poll-skip"], ("truncate-to-hw", 12): ["lost-write"]})
    rows = detect(["truncate-to-hw"], {"nodes": 3}, seeds=5, first_seed=10, mix="both", every_seed=False,
                  baseline=True, run_one=run_one, say=lambda s: None)
    bug, base = rows[0].to_json(), rows[1].to_json()
    assert bug["runs"] == 3 and bug["runs_to_first_detection"] == 3 and bug["caught_runs"] == 1
    assert bug["anomalies"] == ["lost-write", "poll-skip"], "a poll-skip alone is not this switch's family"
    assert [s.nemesis for s in calls[:2]] == [TARGETED["truncate-to-hw"], calls[1].nemesis]
    assert calls[1].nemesis != calls[0].nemesis, "targeted and full mixes alternate"
    assert (calls[0].max_active, calls[1].max_active) == (1, 2), "a targeted scenario runs alone; the full mix overlaps"
    assert base["runs"] == 3 and base["caught_runs"] == 0 and all(not s.bugs for s in calls[3:])
    assert len({s.seed for s in calls}) == len(calls), "every run has a fresh seed"
    assert "truncate-to-hw" in table(rows) and "none (baseline)" in table(rows)


def test_every_seed_counts_catches() -> None:
    run_one, _ = _scripted({("zz", s): ["inconsistent-offsets"] for s in (0, 2, 3)})
    rows = detect(["zz"], {}, seeds=5, first_seed=0, mix="full", every_seed=True, baseline=False,
                  run_one=run_one, say=lambda s: None)
    j = rows[0].to_json()
    assert (j["runs"], j["caught_runs"], j["runs_to_first_detection"], j["mixes_that_caught"]) == (5, 3, 1, ["full"])


def test_an_interrupted_run_stops_the_matrix() -> None:
    """Ctrl-C inside one run heals that run and keeps its history; the matrix must not go on."""
    import pytest

    from kernel.errors import Interrupted

    calls: list[int] = []

    def run_one(spec: RunSpec) -> tuple[int, Any, list[str], list[str], Path | None]:
        calls.append(spec.seed)
        raise Interrupted("interrupted by SIGINT during workload")

    with pytest.raises(Interrupted):
        detect(["zz"], {}, seeds=5, first_seed=0, mix="full", every_seed=True, baseline=True,
               run_one=run_one, say=lambda s: None)
    assert calls == [0]
