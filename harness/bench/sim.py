"""The simulator's speed and reach: simulated seconds per wall second, seeds per hour, and the wall
time `chaos sim-search` needs to catch each bug switch.

- speed: one seed (3 nodes, the simulator's default fault mix) at several workload rates — the
  run default (1,000 ops/s over 8 workers), the sim-search default (20 ops/s), and idle (0.1 ops/s);
  simulated seconds (provisioning, workload, heal, drain) over wall seconds of the simulation alone;
- seeds per hour: `--seeds` seeds of 60 simulated seconds at 20 ops/s, in `--jobs` processes;
- time to detect: per bug switch, `sim-search` from seed 1 (no shrinking), wall seconds until the
  first failing seed is screened, `--detect-budget` each, under three fault mixes: the families
  that target it (`TARGETED`), the composed fault that acts its scenario out (`COMPOSED`: two
  failovers in a row, a follower held back past the lag limit, a deposed leader's stale orders),
  and the simulator's full default mix (every family and composition, as `chaos sim-search` with
  no `--nemesis`). Next to it the container numbers of `chaos detect`, when
  `bench-results/detect.json` exists.

    python -m harness.bench.sim --out bench-results/sim.json

(It drives the harness over our broker, so it lives with the harness: cluster-impl/ imports nothing of it.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.registry import build_test
from harness.run import run
from harness.sim_search import search
from kernel.spec import build_spec

ROOT = Path(__file__).resolve().parents[2]

#: the faults that re-create each switch's scenario on the simulator: (families, interval s, time limit s);
#: a lagging follower must lag past replica.lag.time.max.ms (10 s), stale orders outlast sessions
TARGETED = {
    "truncate-to-hw": ("kill", 2.0, 20.0),
    "ack-before-replication": ("kill,power-loss", 2.0, 20.0),
    "local-isr-shrink": ("partition-one,partition-leader,partition-one-way,kill-leader", 14.0, 60.0),
    "stale-epoch-accepted": ("stale-orders", 14.0, 60.0),
    "lost-disk-in-isr": ("disk-loss", 10.0, 60.0),
}
#: the composition that acts each switch's scenario out (nemesis/: one file per composition)
COMPOSED = {
    "truncate-to-hw": ("double-failover", 14.0, 60.0),
    "ack-before-replication": ("double-failover", 14.0, 60.0),
    "local-isr-shrink": ("lagging-follower", 14.0, 60.0),
    "stale-epoch-accepted": ("stale-orders", 14.0, 60.0),
    "lost-disk-in-isr": ("disk-loss-last-isr", 14.0, 60.0),
}
#: the full default mix: no --nemesis (every family and composition the simulator has)
FULL_MIX = (None, 10.0, 60.0)


def speed(rate: float, time_limit: float, seed: int) -> dict[str, Any]:
    d = Path(tempfile.mkdtemp(prefix="bench-sim-"))
    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": time_limit, "rate": rate, "seed": seed,
                       "store": str(d)})
    try:
        t0 = time.perf_counter()
        out = run(build_test(spec), progress=False, say=lambda _: None, check=False)
        wall = time.perf_counter() - t0
        meta = json.loads((out.run_dir / "test.json").read_text())
    finally:
        shutil.rmtree(d, ignore_errors=True)
    ops, sim_seconds = meta["ops"].get("invoke", 0), float(meta["sim_seconds"])
    return {"rate_ops_s": rate, "time_limit_s": time_limit, "sim_seconds": round(sim_seconds, 1),
            "wall_seconds": round(wall, 2), "sim_per_wall": round(sim_seconds / wall, 2), "client_ops": ops,
            "wall_ms_per_op": round(wall * 1000 / ops, 3) if ops else None}


def detect(bug: str, nemesis: str | None, interval: float, limit: float, budget: float, jobs: int) -> dict[str, Any]:
    """`sim-search --bug BUG` from seed 1 under one fault mix, without shrinking."""
    opts: dict[str, Any] = {"provisioner": "sim", "nodes": 3, "time_limit": limit, "rate": 100.0,
                            "nemesis_interval": interval, "bugs": [bug], "name": "bench-sim"}
    if nemesis is not None:
        opts["nemesis"] = nemesis
    spec = build_test(build_spec(opts)).spec
    o = search(spec, first_seed=1, budget_s=budget, jobs=jobs, say=lambda s: None, shrink_found=False)
    return {"nemesis": nemesis or "(full default mix)", "interval_s": interval, "time_limit_s": limit,
            "seeds": o.seeds, "caught": o.found is not None,
            "time_to_detect_s": round(o.time_to_detect_s, 1) if o.time_to_detect_s is not None else None,
            "seed": o.found.seed if o.found else None, "anomalies": o.found.anomalies if o.found else {}}


def container_detect() -> dict[str, Any]:
    f = ROOT / "bench-results" / "detect.json"
    if not f.is_file():
        return {}
    try:
        return {"source": str(f.relative_to(ROOT)), "data": json.loads(f.read_text())}
    except ValueError:
        return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench-results/sim.json"))
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--detect-budget", type=float, default=120.0)
    ap.add_argument("--speed-time-limit", type=float, default=30.0)
    args = ap.parse_args(argv)
    res: dict[str, Any] = {"speed": []}
    for rate, limit in ((1000.0, min(args.speed_time_limit, 10.0)), (20.0, args.speed_time_limit),
                        (0.1, args.speed_time_limit)):
        row = speed(rate, limit, 42)
        print(f"speed: {row}", file=sys.stderr)
        res["speed"].append(row)
    base = build_test(build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 60.0, "rate": 20.0,
                                  "name": "bench-sim"})).spec
    out = search(base, first_seed=10_000, budget_s=3600, jobs=args.jobs, say=lambda s: None, max_seeds=args.seeds,
                 shrink_found=False)
    res["seeds"] = {"seeds": out.seeds, "jobs": args.jobs, "wall_seconds": round(out.wall_s, 1),
                    "seeds_per_hour": round(out.seeds / out.wall_s * 3600, 1),
                    "sim_seconds": round(out.sim_seconds, 1), "failing_seed": out.found.seed if out.found else None}
    print(f"seeds: {res['seeds']}", file=sys.stderr)
    res["detect"] = {}
    for bug in TARGETED:
        res["detect"][bug] = {}
        for mix, (nemesis, interval, limit) in (("targeted", TARGETED[bug]), ("composed", COMPOSED[bug]),
                                                ("full-mix", FULL_MIX)):
            row = detect(bug, nemesis, interval, limit, args.detect_budget, args.jobs)
            print(f"detect {bug} ({mix}): {row}", file=sys.stderr)
            res["detect"][bug][mix] = row
    res["container_detect"] = container_detect()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
