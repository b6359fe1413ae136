"""`make bench-fleet`: `chaos sim-search --spark-master` on a real Spark standalone cluster on this
machine against `--jobs 2`, written to bench-results/fleet.json.

- The cluster: a master and two workers of one core each, started with pyspark's own daemon script
  (`SPARK_HOME/sbin/spark-daemon.sh`, what Spark's start-master.sh / start-worker.sh call; the pip
  package ships the daemon script, not those wrappers), SPARK_HOME = the pyspark package directory,
  logs and pid files under a scratch directory; stopped at the end whatever happened.
- Same seeds, same verdicts: `--seeds` seeds through `chaos sim-search --jobs 2` and through
  `--spark-master spark://...`, each writing its per-seed verdicts (`--verdicts`); the two files are
  compared line by line, and the wall times give seeds/hour for both.
- A worker killed mid-search: the same range again on the cluster, one worker's JVM (and so its
  executor) killed with SIGKILL after `--kill-after` seconds; the search must still finish with
  every seed once and the same verdicts.
- Every bug switch from seed 1 (the targeted mixes of harness/bench/sim.py), time to detect
  through `--spark-master` beside `--jobs 2`.
- The driver's side: bytes of a result row, memory of 10^6 seeds' verdicts on the driver, and the
  driver's cost per task (an empty job of many tasks) — where the driver becomes the limit.

    .venv/bin/python harness/bench/fleet.py --seeds 500 --out bench-results/fleet.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pyspark

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "cluster-impl")]
CHAOS = str(Path(sys.executable).parent / "chaos")
SPARK_HOME = Path(pyspark.__file__).parent
MASTER_PORT = 7177


class Cluster:
    """A standalone master and `workers` one-core workers on 127.0.0.1, from pyspark's scripts."""

    def __init__(self, scratch: Path, workers: int = 2) -> None:
        self.scratch, self.workers = scratch, workers
        self.url = f"spark://127.0.0.1:{MASTER_PORT}"
        self.env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(scratch / "logs"),
                    "SPARK_PID_DIR": str(scratch / "pids"), "SPARK_WORKER_DIR": str(scratch / "work"),
                    "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_IDENT_STRING": "bench-fleet",
                    "PYSPARK_PYTHON": sys.executable}

    def _daemon(self, *args: str) -> None:
        subprocess.run([str(SPARK_HOME / "sbin" / "spark-daemon.sh"), *args], env=self.env, check=True,
                       capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self._daemon("start", "org.apache.spark.deploy.master.Master", "1", "--host", "127.0.0.1",
                     "--port", str(MASTER_PORT), "--webui-port", "8190")
        time.sleep(5)
        for i in range(1, self.workers + 1):
            self._daemon("start", "org.apache.spark.deploy.worker.Worker", str(i), "--cores", "1", "--memory", "1g",
                         "--webui-port", str(8190 + i), self.url)
        time.sleep(8)

    def worker_pid(self, i: int) -> int:
        return int((self.scratch / "pids" / f"spark-bench-fleet-org.apache.spark.deploy.worker.Worker-{i}.pid")
                   .read_text())

    def stop(self) -> None:
        for i in range(1, self.workers + 1):
            subprocess.run([str(SPARK_HOME / "sbin" / "spark-daemon.sh"), "stop",
                            "org.apache.spark.deploy.worker.Worker", str(i)], env=self.env, capture_output=True)
        subprocess.run([str(SPARK_HOME / "sbin" / "spark-daemon.sh"), "stop", "org.apache.spark.deploy.master.Master",
                        "1"], env=self.env, capture_output=True)


def sim_search(args: list[str], store: Path, verdicts: Path | None = None,
               kill: tuple[Cluster, int, float] | None = None) -> dict[str, Any]:
    """`chaos sim-search ARGS`: wall seconds, exit code, the verdict file's rows, the last lines."""
    cmd = [CHAOS, "sim-search", *args, "--store", str(store), "--no-progress"]
    if verdicts is not None:
        cmd += ["--verdicts", str(verdicts)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    try:
        if kill is not None:
            cluster, worker, after = kill
            work = store / "sim-fleet"
            while proc.poll() is None and not any(work.glob("*/.seed-*")):  # until tasks are running
                time.sleep(1)
            try:
                proc.wait(after)
            except subprocess.TimeoutExpired:
                pid = cluster.worker_pid(worker)
                os.kill(pid, signal.SIGKILL)
                killed = {"worker": worker, "pid": pid, "after_s": after}
        _, err = proc.communicate()
    finally:
        if proc.poll() is None:  # the bench was stopped: so is its search
            proc.terminate()
            proc.wait(30)
    wall = time.monotonic() - t0
    rows = [json.loads(x) for x in verdicts.read_text().splitlines()] if verdicts and verdicts.is_file() else []
    tail = [x for x in err.splitlines() if "seeds/hour" in x or "Spark:" in x or "failed after" in x]
    return {"wall_s": round(wall, 1), "exit": proc.returncode, "rows": rows, "said": tail[-4:], "killed": killed,
            "stderr_tail": err[-1500:] if proc.returncode not in (0, 1) else ""}


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    seeds_b = [r["seed"] for r in b]
    va, vb = {r["seed"]: r["screened"] for r in a}, {r["seed"]: r["screened"] for r in b}
    return {"seeds": len(vb), "duplicated": len(seeds_b) - len(set(seeds_b)), "missing": sorted(set(va) - set(vb)),
            "differing": sorted(s for s in va if s in vb and va[s] != vb[s]), "identical": va == vb,
            "failing": sum(bool(v) for v in vb.values())}


def driver_side(master: str) -> dict[str, Any]:
    """A real result row's size, 10^6 verdicts' memory, and the driver's cost per (empty) task."""
    from harness.fleet.search import fleet_spark

    row = {"key": "seed-123456", "seed": 123456, "screened": {}, "sim_seconds": 77.3, "wall_s": 2.1,
           "faults": [{"id": i, "family": "kill", "kind": "leader", "at_s": 10.0 * i, "duration_s": 4.0,
                       "targets": {"victim": {"role": "leader", "partition": 2}}, "params": {}} for i in range(6)],
           "run_dir": None, "kept": None, "host": "worker-17"}
    tracemalloc.start()
    verdicts: dict[int, dict[str, int]] = {s: {} for s in range(10**6)}
    mem = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del verdicts
    spark = fleet_spark(master)
    sc = spark.sparkContext
    sc.parallelize(range(100), 100).map(lambda x: x).collect()  # warm
    n = 2000
    t0 = time.monotonic()
    sc.parallelize(range(n), n).map(lambda x: x).collect()
    per_task = (time.monotonic() - t0) / n
    return {"row_pickled_bytes": len(pickle.dumps(row)), "verdicts_1e6_bytes": mem,
            "empty_tasks": n, "driver_s_per_task": round(per_task, 5), "cores": sc.defaultParallelism,
            "tasks_per_hour_limit": round(3600 / per_task)}


def _sim_bench_targets() -> dict[str, tuple[str, float, float]]:
    """The fault mix per bug switch of `make bench-sim` (harness/bench/sim.py) that catches it
    from seed 1, read from there so the two benchmarks time the same searches: its targeted
    families, except local-isr-shrink, which only its composition catches (with KIP-966's strict min
    ISR a leader alone in its ISR no longer advances its HW; docs/measurements/detection.md,
    "2026-11-28: `chaos sim-search`, time to detect from seed 1")."""
    spec = importlib.util.spec_from_file_location("bench_sim", ROOT / "harness" / "bench" / "sim.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {**mod.TARGETED, "local-isr-shrink": mod.COMPOSED["local-isr-shrink"]}


TARGETED = _sim_bench_targets()
#: the transaction switches' searches, on the transactional workload at 40 ops/s (bench-sim times the
#: replication switches only): each the mix that caught it from seed 1 on the simulator
#: (docs/measurements/transactions.md, "chaos sim-search for the four transaction switches")
TXN_TARGETED: dict[str, tuple[str, float, float]] = {
    "lso-ignores-open-txns": ("kill-leader", 10.0, 20.0),
    "forget-prepared-txns": ("kill-controller,kill-leader", 4.0, 20.0),
    "no-txn-verification": ("delayed-produce-leader", 10.0, 20.0),
    "marker-ack-before-replication": ("held-markers", 5.0, 30.0),
}


def detect(bug: str, how: list[str], store: Path, budget: float) -> dict[str, Any]:
    fams, interval, limit = TARGETED[bug] if bug in TARGETED else TXN_TARGETED[bug]
    load = ["--rate", "100"] if bug in TARGETED else ["--txn", "--rate", "40"]
    r = sim_search(["--bug", bug, "--nemesis", fams, "--nemesis-interval", str(interval), "--time-limit", str(limit),
                    *load, "--first-seed", "1", "--budget", f"{budget:.0f}s", "--no-check", "--no-shrink",
                    *how], store)
    said = " ".join(r["said"])
    import re

    m = re.search(r"seed (\d+) failed after ([\d.]+) s", said)
    return {"caught": m is not None, "seed": int(m.group(1)) if m else None,
            "time_to_detect_s": float(m.group(2)) if m else None, "wall_s_with_shrink": r["wall_s"],
            "exit": r["exit"], "stderr_tail": r["stderr_tail"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench-results/fleet.json"))
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--search", default="--bug truncate-to-hw --nemesis kill,partition --nemesis-interval 2 "
                    "--time-limit 5 --rate 5,20 --check-batch 0",
                    help="sim-search options shared by both sides of the comparison")
    ap.add_argument("--kill-after", type=float, default=60.0, help="seconds after the first task started")
    ap.add_argument("--reference", type=Path, default=None,
                    help="per-seed verdicts of --jobs 2 over the range (a compare's), for the killed-worker search")
    ap.add_argument("--kill-seeds", type=int, default=None, help="seeds of the killed-worker search (default --seeds)")
    ap.add_argument("--detect-budget", type=float, default=90.0)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: compare,kill,detect,driver")
    ap.add_argument("--bugs", default="", help="comma-separated bug switches of the detect part (default: all)")
    ap.add_argument("--fleet-first", action="store_true", help="in the compare part, the Spark search before --jobs 2")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    scratch = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    res: dict[str, Any] = {"seeds": args.seeds, "search": args.search, "machine_cores": os.cpu_count()}
    prev = json.loads(args.out.read_text()) if args.out.is_file() else {}
    res.update({k: v for k, v in prev.items() if k not in res})
    common = args.search.split() + ["--first-seed", str(args.first_seed), "--keep-going", "--budget", "10h",
                                    "--no-check", "--no-shrink"]
    def save() -> None:  # after every part: a bench stopped later keeps what it measured
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")

    cluster = Cluster(scratch)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench still stops its cluster
    cluster.start()
    try:
        if "compare" not in skip:
            rng = ["--max-seeds", str(args.seeds)]

            def by_jobs() -> dict[str, Any]:
                got = sim_search([*common, *rng, "--jobs", "2"], scratch / "s-jobs", scratch / "jobs.jsonl")
                print(f"--jobs 2: {got['wall_s']} s {got['said']}", file=sys.stderr)
                return got

            def by_fleet() -> dict[str, Any]:
                got = sim_search([*common, *rng, "--spark-master", cluster.url], scratch / "s-fleet",
                                 scratch / "fleet.jsonl")
                print(f"--spark-master: {got['wall_s']} s {got['said']}", file=sys.stderr)
                return got

            # the machine drifts over minutes: a pair measured both ways shows whether the order mattered
            if args.fleet_first:
                fleet = by_fleet()
                jobs = by_jobs()
            else:
                jobs = by_jobs()
                fleet = by_fleet()
            cmp = compare(jobs["rows"], fleet["rows"])
            jph = args.seeds / jobs["wall_s"] * 3600
            fph = args.seeds / fleet["wall_s"] * 3600
            res["compare"] = {"jobs2": {k: v for k, v in jobs.items() if k != "rows"},
                              "spark_standalone_2x1": {k: v for k, v in fleet.items() if k != "rows"},
                              "verdicts": cmp, "fleet_first": args.fleet_first, "jobs2_seeds_per_hour": round(jph),
                              "spark_seeds_per_hour": round(fph), "ratio": round(fph / jph, 3)}
            (scratch / "jobs.jsonl").replace(scratch / "reference.jsonl")
            res["compare"]["reference"] = str(scratch / "reference.jsonl")
            print(f"compare: {json.dumps(res['compare'])[:600]}", file=sys.stderr)
            save()
        if "kill" not in skip:
            n = args.kill_seeds or args.seeds
            rng = ["--max-seeds", str(n)]
            ref_file = args.reference or scratch / "reference.jsonl"
            if not ref_file.is_file():
                sim_search([*common, *rng, "--jobs", "2"], scratch / "s-jobs-k", ref_file)
            ref = [r for r in map(json.loads, ref_file.read_text().splitlines())
                   if r["seed"] < args.first_seed + n]  # the compare's --jobs 2 verdicts of this range
            killed = sim_search([*common, *rng, "--spark-master", cluster.url], scratch / "s-kill",
                                scratch / "kill.jsonl", kill=(cluster, 2, args.kill_after))
            res["worker_killed"] = {**{k: v for k, v in killed.items() if k != "rows"},
                                    "verdicts": compare(ref, killed["rows"]), "seeds_range": n}
            print(f"killed: {json.dumps(res['worker_killed'])[:600]}", file=sys.stderr)
            save()
            cluster.stop()  # the killed worker's slot back: restart the whole cluster
            time.sleep(3)
            cluster.start()
        if "detect" not in skip:
            bugs = [b for b in args.bugs.split(",") if b] or [*TARGETED, *TXN_TARGETED]
            res["detect"] = {b: r for b, r in prev.get("detect", {}).items() if b not in bugs}
            for bug in bugs:
                row = {"jobs2": detect(bug, ["--jobs", "2"], scratch / "d-jobs", args.detect_budget),
                       "spark": detect(bug, ["--spark-master", cluster.url], scratch / "d-fleet", args.detect_budget)}
                print(f"detect {bug}: {row}", file=sys.stderr)
                res["detect"][bug] = row
                save()
        if "driver" not in skip:
            res["driver"] = driver_side("local[2]")
            print(f"driver: {res['driver']}", file=sys.stderr)
            save()
    finally:
        cluster.stop()
    save()
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
