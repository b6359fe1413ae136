"""Our checks and Jepsen's own Kafka checker (`jepsen.tests.kafka/checker`, the shared build) agree on
every corpus history and on two short real runs: the same verdict and the same anomaly types, apart
from the differences `results/README.md` documents on purpose (each named in `DOCUMENTED` below).

Both read the same input: the history alone (Jepsen's checker does not read replica dumps, so our
`divergent-replicas` and replica-based `inconsistent-offsets` are out of this comparison by
construction), with `--sub-via` from the run's test.json.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from results.check import CheckResult, check_runs, sub_via

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
FIXTURES = HERE.parent / "results" / "fixtures"
SOURCES = sorted(p for p in CORPUS.iterdir() if p.is_dir()) + sorted(p for p in FIXTURES.iterdir() if p.is_dir())
pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: results/README.md, "Jepsen's checker": what Jepsen reports beyond ours, and when
DOCUMENTED: dict[str, Callable[[set[str], str], bool]] = {
    # Jepsen's unseen counts every acknowledged value never read; ours leaves the lost writes out
    "unseen": lambda ours, history: "lost-write" in ours,
    # two values at one offset: Jepsen also calls the unread one at the highest read offset lost
    "lost-write": lambda ours, history: "inconsistent-offsets" in ours,
    # Jepsen indexes reads by value, so a value read at two offsets in offset order looks rewound
    "int-nonmonotonic-poll": lambda ours, history: "duplicate" in ours,
    # a poll's rebalance log: Jepsen 0.3.11 reads only an event's `keys` (not `revoked`/`assigned`)
    # within a poll, and never between polls; we forget a key's last read when a rebalance names it
    "int-poll-skip": lambda ours, history: '"revoked"' in history,
    "poll-skip": lambda ours, history: '"revoked"' in history,
}


def _jepsen(tool: str, run: Path) -> dict[str, Any]:
    how = ",".join(sub_via(json.loads((run / "test.json").read_text()) if (run / "test.json").exists() else None))
    proc = subprocess.run([tool, "--summary", "--sub-via", how, str(run / "history.jsonl")], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode in (0, 1, 3), proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.fixture(scope="module")
def both(spark: Any, jepsen_check: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("agree")
    runs = []
    for src in SOURCES:
        run = root / src.name
        run.mkdir()
        for name in ("history.jsonl", "test.json"):
            if (src / name).exists():
                shutil.copy(src / name, run / name)
        runs.append(run)
    ours = check_runs(runs, spark_master="local[2]", perf=False, elle_cli="")
    with ThreadPoolExecutor(2) as pool:
        theirs = list(pool.map(lambda r: _jepsen(jepsen_check, r), runs))
    return {r.name: (o, t) for r, o, t in zip(runs, ours, theirs, strict=True)}


@pytest.mark.parametrize("case", [p.name for p in SOURCES])
def test_same_verdict_and_anomaly_types_as_jepsen(both: dict[str, Any], case: str) -> None:
    ours, theirs = both[case]
    assert isinstance(ours, CheckResult)
    mine = set(ours.anomalies)
    if "unexpected" in mine:
        # Jepsen's checker throws on a value nobody sent (no-writer-of-value): it cannot judge
        assert theirs["valid?"] == "unknown" and theirs.get("checker-crashed"), theirs
        return
    jepsen = set(theirs["error-types"])
    history = (both[case][0].run_dir / "history.jsonl").read_text()
    extra = {t for t in jepsen - mine if t in DOCUMENTED and DOCUMENTED[t](mine, history)}
    assert jepsen - extra == mine, f"ours {sorted(mine)}, Jepsen {sorted(jepsen)}"
    idempotent = (ours.run_dir is None or not (ours.run_dir / "test.json").exists()
                  or json.loads((ours.run_dir / "test.json").read_text()).get("config", {}).get("idempotence", True))
    if not extra and idempotent:
        assert ours.valid is theirs["valid?"], (ours.bad_error_types, theirs["bad-error-types"])
        assert sorted(ours.bad_error_types) == sorted(theirs["bad-error-types"])
    else:
        # Jepsen's documented extras are bad in Jepsen's eyes, and Jepsen cannot know that the run's
        # producers were not idempotent: beyond those, the same bad types
        allowed = set(ours.bad_error_types) | extra | (set() if idempotent else {"duplicate"})
        assert set(ours.bad_error_types) <= set(theirs["bad-error-types"]) <= allowed, theirs
