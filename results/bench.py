"""`make bench-check`: check time and peak memory for generated histories of 10^4 .. 10^7 ops.

Histories are of a correct log (so the check does all its work and finds nothing): producers send
to 16 keys, consumers poll forward in batches, a final drain reads everything. We report the
SparkSession start-up (fixed overhead) separately from each check, and the per-op cost, so the
growth can be read off. Peak memory is the JVM's VmHWM plus this process's max RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path

DRAIN_BATCH = 500


def generate(path: Path, n_ops: int, seed: int = 1, keys: int = 16) -> int:
    rng = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(keys)]
    pos = [0] * keys
    i = 0
    v = 0
    with open(path, "w") as f:

        def w(d: dict) -> None:  # type: ignore[type-arg]
            nonlocal i
            d["index"], d["time"] = i, i * 1000
            f.write(json.dumps(d, separators=(",", ":")) + "\n")
            i += 1

        drain_ops = 2 + 2 * sum(-(-len(log) // DRAIN_BATCH) for log in logs)  # grows as we go; re-checked below
        while i < n_ops - drain_ops:
            if rng.random() < 0.7:
                k, p = rng.randrange(keys), rng.randrange(8)
                v += 1
                w({"process": p, "type": "invoke", "f": "send", "value": [["send", k, v]]})
                logs[k].append(v)
                w({"process": p, "type": "ok", "f": "send", "value": [["send", k, [len(logs[k]) - 1, v]]]})
            else:
                k = rng.randrange(keys)
                p = 100 + k
                got = [[o, logs[k][o]] for o in range(pos[k], min(pos[k] + 20, len(logs[k])))]
                pos[k] += len(got)
                w({"process": p, "type": "invoke", "f": "poll", "value": [["poll"]]})
                w({"process": p, "type": "ok", "f": "poll", "value": [["poll", {str(k): got}]]})
            if i % 1000 < 2:
                drain_ops = 2 + 2 * sum(-(-len(log) // DRAIN_BATCH) + 1 for log in logs)
        # the final drain, as `chaos run` does it: assign every key, then batch-bounded polls
        keys_all = list(range(keys))
        w({"process": 999, "type": "invoke", "f": "assign", "value": keys_all, "final": True})
        w({"process": 999, "type": "ok", "f": "assign", "value": keys_all, "final": True})
        for k, log in enumerate(logs):
            for start in range(0, len(log), DRAIN_BATCH):
                batch = [[o, log[o]] for o in range(start, min(start + DRAIN_BATCH, len(log)))]
                w({"process": 999, "type": "invoke", "f": "poll", "value": [["poll"]], "final": True})
                w({"process": 999, "type": "ok", "f": "poll", "final": True, "value": [["poll", {str(k): batch}]]})
    return i


def jvm_peak_mb() -> float:
    total = 0.0
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
        except OSError:
            continue
        if f"PPid:\t{me}\n" in status:
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
    return total


def fit(rows: list[dict]) -> dict[str, float] | None:  # type: ignore[type-arg]
    """Least squares check_s = fixed + per_op * ops: the fixed overhead per check (job scheduling,
    the small Python passes) and the marginal cost of an op, reported separately."""
    if len(rows) < 2:
        return None
    xs, ys = [r["ops"] for r in rows], [r["check_s"] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return {"fixed_s": round(my - b * mx, 2), "per_op_us": round(b * 1e6, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/check.json"))
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args()
    from results.check import check_run
    from results.spark import get_spark

    t0 = time.perf_counter()
    get_spark(args.master)
    startup = time.perf_counter() - t0
    # the first job in a fresh JVM pays class loading and JIT; measure it once on a tiny history
    with tempfile.TemporaryDirectory() as d:
        generate(Path(d) / "history.jsonl", 1000)
        t = time.perf_counter()
        check_run(Path(d), spark_master=args.master, perf=False)
        warmup = time.perf_counter() - t
    print(f"spark start-up {startup:.1f} s, first (warm-up) check of 10^3 ops {warmup:.1f} s", flush=True)
    rows: list[dict] = []  # type: ignore[type-arg]
    for n in [int(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            run = Path(d)
            tg = time.perf_counter()
            ops = generate(run / "history.jsonl", n)
            gen_s = time.perf_counter() - tg
            t = time.perf_counter()
            r = check_run(run, spark_master=args.master, perf=False)
            dt = time.perf_counter() - t
            row = {
                "ops": ops,
                "bytes": (run / "history.jsonl").stat().st_size,
                "generate_s": round(gen_s, 2),
                "check_s": round(dt, 2),
                "us_per_op": round(dt / ops * 1e6, 2),
                "valid": r.valid,
                "jvm_peak_mb": round(jvm_peak_mb(), 1),
                "python_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "phases_s": r.timings,
                # the machine is shared: the 1-minute load average says how much of the time was ours
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(
                json.dumps(
                    {
                        "spark_startup_s": round(startup, 2),
                        "warmup_check_s": round(warmup, 2),
                        "master": args.master,
                        "cores": os.cpu_count(),
                        "runs": rows,
                        "fit": fit(rows),
                    },
                    indent=2,
                )
            )
    print(f"fit: {fit(rows)}; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
