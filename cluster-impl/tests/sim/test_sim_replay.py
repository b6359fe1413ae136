"""Exact replay: a seed's simulated history and replica logs are the same bytes in another process,
under another hash seed — for clean seeds and for a seed that a bug switch makes fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.provision.sim_screen import screen

SIMULATE = """
import sys
from pathlib import Path
import shutil
from harness.sim_search import simulate
from kernel.spec import build_spec
seed, bug, nemesis, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 20.0, "rate": 100.0, "seed": seed,
                   "nemesis": nemesis, "nemesis_interval": 2.0, "bugs": [bug] if bug else []})
run_dir, _ = simulate(spec, out / "store")
for part in ("history.jsonl", "replicas"):
    shutil.move(str(run_dir / part), str(out / part))
"""

CASES = [  # (seed, bug switch, nemesis, fails?)
    (2, "truncate-to-hw", "kill", True),
    (2, "", "kill,partition", False),
    (3, "", "power-loss,pause,clock", False),
]


def _simulate(seed: int, bug: str, nemesis: str, out: Path, hash_seed: str) -> bytes:
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    subprocess.run([sys.executable, "-c", SIMULATE, str(seed), bug, nemesis, str(out)], env=env, check=True,
                   timeout=600, capture_output=True)
    return (out / "history.jsonl").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "bug", "nemesis", "fails"), CASES)
def test_a_seed_replays_byte_for_byte_across_processes(tmp_path: Path, seed: int, bug: str, nemesis: str,
                                                       fails: bool) -> None:
    first = _simulate(seed, bug, nemesis, tmp_path / "a", "1")
    second = _simulate(seed, bug, nemesis, tmp_path / "b", "2")
    assert first.count(b"\n") > 1000  # a real workload ran
    assert b'"process":"nemesis"' in first  # and faults
    assert first == second
    dumps = sorted(f.relative_to(tmp_path / "a") for f in (tmp_path / "a" / "replicas").rglob("*.jsonl"))
    assert dumps and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in dumps)
    found = screen(tmp_path / "a")
    assert bool(found) is fails, found
    if fails:
        assert "lost-write" in found or "inconsistent-offsets" in found
