"""`chaos replay`'s side-by-side lines from real run directories (the re-run itself is a Docker test)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.run_cli import _counts, _hit, _schedule_lines, _side_by_side


def test_schedule_lines_name_the_node_each_fault_hit(valid_run: Path) -> None:
    schedule = json.loads((valid_run / "test.json").read_text())["schedule"]
    lines = _schedule_lines(schedule, _hit(valid_run))
    assert lines == ["    8.0s partition-controller victim=controller:n3 -> n1",
                     "   23.1s kill-controller victim=controller:n2 -> n3"]


def test_anomalies_side_by_side(valid_run: Path, invalid_run: Path) -> None:
    before, after = _counts(invalid_run), _counts(valid_run)
    assert before == {"inconsistent-offsets": 1, "unseen": 4} and after == {}
    kinds = sorted(set(before) | set(after))
    out = _side_by_side(("original", "replay"), [f"{t}: {before.get(t, '-')}" for t in kinds],
                        [f"{t}: {after.get(t, '-')}" for t in kinds])
    assert out == ["original                | replay",
                   "inconsistent-offsets: 1 | inconsistent-offsets: -   <- differs",
                   "unseen: 4               | unseen: -   <- differs"]
    same = _side_by_side(("a", "b"), ["unseen: 4"], ["unseen: 4"])
    assert same[1] == "unseen: 4 | unseen: 4"
