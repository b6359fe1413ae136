"""`chaos run` on real containers: a complete store, a well-formed history, the same schedule for the
same seed, and Ctrl-C leaving nothing behind but the history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import docker
import pytest

from tests.conftest import CHAOS, run_chaos

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ARGS = ["--nodes", "3", "--time-limit", "20", "--nemesis", "partition", "--nemesis-interval", "6",
        "--concurrency", "4", "--rate", "40", "--partitions", "2", "--no-progress"]
#: families whose targets are planned nodes (the replay property) next to live ones (leader, controller)
REPLAY_NEMESES = "partition-one,partition-halves,pause-one,kill-one,clock-bump,kill-leader,pause-controller"


def _run_dir(store: Path) -> Path:
    dirs = [p for p in (store / "queue").iterdir() if p.is_dir()]
    assert len(dirs) == 1
    return dirs[0]


def _history(run_dir: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]


def _well_formed(ops: list[dict]) -> None:  # type: ignore[type-arg]
    assert [o["index"] for o in ops] == list(range(len(ops)))
    pending: dict[object, dict] = {}  # type: ignore[type-arg]
    for o in ops:
        if o["process"] == "nemesis":
            assert o["type"] == "info"
            continue
        if o["type"] == "invoke":
            assert o["process"] not in pending
            pending[o["process"]] = o
        else:
            inv = pending.pop(o["process"])
            assert inv["f"] == o["f"] and o["type"] in ("ok", "fail", "info")
    assert not pending, "every invoke has exactly one completion"


def _invocations(ops: list[dict]) -> dict[int, list[object]]:  # type: ignore[type-arg]
    per: dict[int, list[object]] = defaultdict(list)
    for o in ops:
        if o["type"] == "invoke" and "worker" in o:
            per[o["worker"]].append((o["f"], o["value"]))
    return per


def _hit_as_planned(meta: dict, ops: list[dict]) -> int:  # type: ignore[type-arg]
    """The seed replay property: every fault the history records hit what test.json planned — node
    targets the planned node, halves the planned grudge, clock bumps the planned nodes; live targets
    (leader, controller) name their plan and how they were resolved. Returns the faults compared."""
    from nemesis import grudge

    planned = {f["id"]: f for f in meta["schedule"]}
    seen = 0
    for o in ops:
        if o["process"] != "nemesis" or not o["f"].startswith("start-"):
            continue
        f, v = planned[o["fault"]], o["value"]
        assert o["f"] == f"start-{f['family']}" and v["kind"] == f["kind"]
        for role, t in f["targets"].items():
            hit = v.get("targets", {}).get(role)
            if f["family"] == "clock":
                assert t["node"] in v["nodes"]
            elif t["role"] == "node":
                assert hit == {"planned": f"node {t['node']}", "node": t["node"], "how": "planned"}, (f, v)
            else:
                assert hit["how"] in ("metadata", "fallback") and hit["planned"].startswith(t["role"]), (f, v)
        if f["kind"] == "halves":
            assert v["grudge"] == grudge.describe(grudge.halves(f["params"]["order"]))
        seen += 1
    return seen


def test_two_runs_with_one_seed(chaos_home: Path, tmp_path: Path) -> None:
    runs = []
    for i in (1, 2):
        store = tmp_path / f"store{i}"
        args = [{"partition": REPLAY_NEMESES, "6": "3"}.get(a, a) for a in ARGS]
        res = run_chaos("run", *args, "--seed", "11", "--store", str(store), "--cluster", f"e2e-{os.getpid()}",
                        timeout=600)
        assert res.returncode in (0, 1), res.stderr[-3000:]
        runs.append(_run_dir(store))
    first = runs[0]
    for name in ("test.json", "history.jsonl", "results.json"):
        assert (first / name).is_file(), name
    assert {p.name for p in (first / "replicas").iterdir()} == {"n1", "n2", "n3"}
    assert all((first / "replicas" / n / f"chaos-{k}.jsonl").is_file() for n in ("n1", "n2", "n3") for k in (0, 1))
    assert (first / "nodes" / "n1" / "broker.log").is_file()
    meta = json.loads((first / "test.json").read_text())
    assert meta["complete"] is True and meta["seed"] == 11 and meta["git"] and meta["image"]
    ops = [_history(r) for r in runs]
    for h in ops:
        _well_formed(h)
        assert any(o["process"] == "nemesis" and o["f"].startswith("start-") for o in h)
        assert any(o.get("final") for o in h)
    metas = [json.loads((r / "test.json").read_text()) for r in runs]
    assert metas[0]["schedule"] == metas[1]["schedule"], "same seed, same faults, kinds, targets, times"
    # each fault's own ops, in order; faults that overlap interleave by how long their steps take (a
    # kill's stop is recorded after the restart), so two runs may record them in either order (CI:
    # fault 4's stop-kill 0.15 s before fault 5's start-partition in one run, 0.04 s after in the other)
    nem = [sorted((o["fault"], o["index"], o["f"], o["value"].get("kind")) for o in h
                  if o["process"] == "nemesis" and o["f"] != "heal") for h in ops]
    assert [(fid, f, kind) for fid, _, f, kind in nem[0]] == [(fid, f, kind) for fid, _, f, kind in nem[1]]
    for meta, h in zip(metas, ops, strict=True):
        assert _hit_as_planned(meta, h) >= 2, "the schedule started faults, and each hit what was planned"
    inv = [_invocations(h) for h in ops]
    assert set(inv[0]) == set(inv[1]) == {0, 1, 2, 3}
    for w in inv[0]:
        n = min(len(inv[0][w]), len(inv[1][w]))
        assert n > 3 and inv[0][w][:n] == inv[1][w][:n], f"worker {w}'s invocations differ"
    results = json.loads((first / "results.json").read_text())
    assert results["valid"] in (True, False, "unknown")


def test_ctrl_c_mid_run_heals_tears_down_and_keeps_the_history(chaos_home: Path, tmp_path: Path) -> None:
    cluster = f"sigint-run-{os.getpid()}"
    store = tmp_path / "store"
    proc = subprocess.Popen([CHAOS, "run", *ARGS[:-1], "--time-limit", "120", "--seed", "3", "--store", str(store),
                             "--cluster", cluster, "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 180
    hist = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(store.glob("queue/*/history.jsonl"))
        if found and sum(1 for _ in found[0].open()) > 40:
            hist = found[0]
            break
        time.sleep(0.5)
    assert hist is not None, "the run never got going"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode >= 2
    assert "interrupted" in err.splitlines()[-1]
    c = docker.from_env()
    assert c.containers.list(all=True, filters={"label": f"chaos.cluster={cluster}"}) == []
    assert c.networks.list(filters={"label": f"chaos.cluster={cluster}"}) == []
    lines = hist.read_text().splitlines()
    assert len(lines) > 40 and all(json.loads(x) for x in lines)
    assert json.loads((hist.parent / "test.json").read_text())["complete"] is False
