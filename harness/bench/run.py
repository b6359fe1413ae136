"""`make bench-run`: how many ops/s the harness itself sustains, with no nemesis, and its overhead.

Runs `chaos run` on 3 nodes with no faults and a rate far above what the cluster answers, so the
workers run flat out; reports completed ops/s (from the history) and the seconds each phase took
(provision, deploy, workload, heal/recover, drain, collect, check) from test.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from harness.registry import build_test
from harness.run import run
from kernel.spec import build_spec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/run.json"))
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        spec = build_spec({"nodes": 3, "nemesis": (), "time_limit": args.time_limit, "concurrency": args.concurrency,
                           "rate": 100_000.0, "seed": 1, "store": d, "cluster": "bench-run", "partitions": 3})
        t = time.perf_counter()
        out = run(build_test(spec), progress=False)
        total = time.perf_counter() - t
        meta = json.loads((out.run_dir / "test.json").read_text())
    ops = meta["ops"]
    completed = ops["ok"] + ops["fail"] + ops["info"]
    res = {"nodes": 3, "concurrency": args.concurrency, "time_limit_s": args.time_limit, "valid": out.valid,
           "completed_ops": completed, "ok_ops": ops["ok"], "ops_per_s": round(completed / args.time_limit, 1),
           "total_s": round(total, 1), "phases_s": meta["phases"]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
