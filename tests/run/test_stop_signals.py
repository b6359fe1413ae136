"""Any stop is a clean stop: SIGTERM to `chaos run` in each phase heals, tears down, keeps the history.

For each phase (provision, deploy, the workload with a fault active, the final drain, the check) a
real run is started and sent SIGTERM the moment `test.json` (or the history) shows it is there.
Afterwards: exit 143 with one sentence, no labelled container or network, no iptables rule of ours
on the host, a history the strict reader accepts, and `test.json` saying where the run stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import docker
import pytest

from kernel.history import scan
from tests.conftest import CHAOS

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ARGS = ["--nodes", "3", "--nemesis", "partition-halves,pause-one", "--nemesis-interval", "2",
        "--concurrency", "8", "--partitions", "2", "--no-progress", "--seed", "5"]


def _meta(store: Path) -> dict | None:  # type: ignore[type-arg]
    found = list(store.glob("queue/*/test.json"))
    if not found:
        return None
    try:
        return json.loads(found[0].read_text())  # type: ignore[no-any-return]
    except ValueError:
        return None  # caught between writes: the file is replaced atomically, but be safe


def _fault_active(store: Path) -> bool:
    found = list(store.glob("queue/*/history.jsonl"))
    if not found:
        return False
    open_faults: set[int] = set()
    for line in found[0].read_text().splitlines():
        op = json.loads(line) if line.endswith("}") else {}
        if op.get("process") == "nemesis" and "fault" in op:
            (open_faults.add if op["f"].startswith("start-") else open_faults.discard)(op["fault"])
    return bool(open_faults)


def _drain_started(store: Path) -> bool:
    """True once the history holds an op of the final drain: `phase` turns to drain a moment before
    the first drain op is written, and a signal in that gap leaves nothing of the drain to check."""
    found = list(store.glob("queue/*/history.jsonl"))
    if not found:
        return False
    return any(line.endswith("}") and json.loads(line).get("final") for line in found[0].read_text().splitlines())


@pytest.mark.parametrize("phase", ["provision", "deploy", "workload", "drain", "check"])
def test_sigterm_in_each_phase_leaves_nothing_behind(phase: str, chaos_home: Path, tmp_path: Path) -> None:
    cluster = f"term-{phase}-{os.getpid()}"
    store = tmp_path / "store"
    # a busy workload, so the drain has thousands of records to read and lasts long enough to be hit
    limit = "40" if phase == "workload" else "12"
    proc = subprocess.Popen([CHAOS, "run", *ARGS, "--time-limit", limit, "--rate", "600", "--store", str(store),
                             "--cluster", cluster], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    hit = False
    while time.monotonic() < deadline and proc.poll() is None:
        meta = _meta(store) or {}
        ready = {"workload": _fault_active, "drain": _drain_started}.get(phase, lambda _s: True)
        if meta.get("phase") == phase and ready(store):
            proc.send_signal(signal.SIGTERM)
            hit = True
            break
        time.sleep(0.02)
    if not hit:
        proc.kill()
        _, err = proc.communicate(timeout=60)
        raise AssertionError(f"the run never reached {phase} (exit {proc.returncode}): {err[-2000:]}")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err[-3000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert last.startswith("chaos: interrupted by SIGTERM during ") and "Traceback" not in err
    c = docker.from_env()
    assert c.containers.list(all=True, filters={"label": f"chaos.cluster={cluster}"}) == []
    assert c.networks.list(filters={"label": f"chaos.cluster={cluster}"}) == []
    host_rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert "CHAOS" not in host_rules
    meta = _meta(store)
    assert meta is not None and meta["complete"] is False and meta["interrupted"] == "SIGTERM"
    assert meta["stopped_in"] == phase, f"aimed at {phase}, stopped in {meta['stopped_in']}"
    history = next(store.glob("queue/*/history.jsonl"))
    facts = scan(history)  # strict: every line well-formed (a crash could only tear the last one)
    if phase in ("workload", "drain", "check"):
        assert facts.client_ops > 0 and facts.nemesis_ops > 0
    if phase in ("drain", "check"):
        assert facts.final_ops > 0
