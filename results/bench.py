"""`make bench-check`: our check against Jepsen's own Kafka checker, side by side, on the same files.

Histories are of a correct log (so the check does all its work and finds nothing): producers send to
16 keys, consumers poll forward in batches, a final drain reads everything; plus a real run's
history (`tests/results/fixtures/valid-kill-controller`). For each: our check on the warm session of
this process, our check as a fresh `chaos check` process (session start included, 10^4 and the real
run), and Jepsen's checker (`$JEPSEN_KAFKA_CHECK`, else `jepsen-kafka/check` under
`$CHAOS_SHARED_TOOLS`, as the tests find it; results/README.md says what it is; a fresh JVM per
history, as it is used) where it is present, with both times and the ratio, and peak memory (our
JVM's VmHWM, this process's max RSS, Jepsen's JVM's VmHWM), and the plain single-process Python
reference of the same definitions (`results.reference`, in this process) on the same file, with the
ratio of our warm check to it. Then many runs in one job: N small run directories checked by one
`check_runs` call (warm), by one `chaos check DIR...` process, by N `chaos check` processes one
after another, and by the Python reference one after another. First of all, when a real `chaos run`
directory is at hand (`--real-run`, default `store/latest`, which `make run` leaves): the check
phase that run took, a fresh `chaos check` of it with its replica dumps beside Jepsen's checker on
the same file, our warm check, and twenty copies in one call (`real_run_rows`). Numbers go to
bench-results/check.json; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DRAIN_BATCH = 500
#: about how many bytes an op of `generate` takes in history.jsonl
BYTES_PER_OP = 110


class _Lines:
    """A history file written an op at a time: `index` counts the lines, `time` is 1 µs apart."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.n = 0

    def __call__(self, d: dict[str, Any]) -> None:
        d["index"], d["time"] = self.n, self.n * 1000
        self.f.write(json.dumps(d, separators=(",", ":")) + "\n")
        self.n += 1


def generate(path: Path, n_ops: int, seed: int = 1, keys: int = 16) -> int:
    rng = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(keys)]
    pos = [0] * keys
    v = 0
    with open(path, "w") as f:
        w = _Lines(f)

        drain_ops = 2 + 2 * sum(-(-len(log) // DRAIN_BATCH) for log in logs)  # grows as we go; re-checked below
        while w.n < n_ops - drain_ops:
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
            if w.n % 1000 < 2:
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
    return w.n


def generate_txn(path: Path, n_ops: int, seed: int = 1, keys: int = 16, clients: int = 8) -> int:
    """A history of Kafka transactions over a correct log, `n_ops` lines or a few more.

    Up to `clients` transactions are open at once, each of one process: a seeded mix of one to four
    sends and polls, planned at its invoke. A send takes the key's next offset at once (Kafka orders a
    transaction's records when they are sent, so open transactions interleave on a key: G0 and ww
    G1c cycles, which are not bad); a poll is read committed: from the process's position, in offset
    order, the committed records (aborted ones and markers skipped) below the first record of a
    transaction still open (the last stable offset), at most 8 records; a process is assigned four
    keys and a poll reads one of them (so a line is ~150 bytes, as the other generator's). A transaction commits (ok),
    aborts (fail: its records and its polls' progress are dropped, its completion still carries its
    offsets and what it read), or, rarely, ends `info` with either outcome, and its process is
    retired (a new one assigns its keys and reads them from the start). Each outcome writes a marker
    at the next offset of every key it sent to, so offsets have gaps, as Kafka's do. A final drain
    reads every committed record."""
    rng = random.Random(seed)
    OPEN, DONE, DROPPED = 0, 1, 2  # noqa: N806 - a record's state
    logs: list[list[list[int]]] = [[] for _ in range(keys)]  # per key, in offset order: [offset, value, state]
    v = 0
    proc_seq = clients

    with open(path, "w") as f:
        w = _Lines(f)

        def append(k: int, value: int, state: int) -> list[int]:
            log = logs[k]
            rec = [log[-1][0] + 1 if log else 0, value, state]
            log.append(rec)
            return rec

        procs = list(range(clients))
        pos: dict[int, list[int]] = {}  # process -> per key, the index in logs[k] it reads next
        mine: dict[int, list[int]] = {}  # process -> the keys it is assigned
        txns: dict[int, dict] = {}  # type: ignore[type-arg]  # process -> its open transaction

        def start(p: int) -> None:
            nonlocal v
            if p not in pos:
                pos[p] = [0] * keys
                mine[p] = sorted(rng.sample(range(keys), 4))
                w({"process": p, "type": "invoke", "f": "assign", "value": mine[p]})
                w({"process": p, "type": "ok", "f": "assign", "value": mine[p]})
            plan: list[list[int | str]] = []
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.5:
                    v += 1
                    plan.append(["send", rng.randrange(keys), v])
                else:
                    plan.append(["poll"])
            fs = {m[0] for m in plan}
            fn = "txn" if len(fs) > 1 else str(plan[0][0])
            txns[p] = {"f": fn, "plan": plan, "done": [], "pos": list(pos[p]), "sent": []}
            w({"process": p, "type": "invoke", "f": fn, "value": plan})

        def step(p: int) -> None:
            t = txns[p]
            m = t["plan"][len(t["done"])]
            if m[0] == "send":
                rec = append(m[1], m[2], OPEN)
                t["sent"].append((m[1], rec))
                t["done"].append(["send", m[1], [rec[0], m[2]]])
                return
            got: dict[str, list[list[int]]] = {}
            for k in rng.sample(mine[p], 1):
                log, at = logs[k], t["pos"][k]
                out: list[list[int]] = []
                while at < len(log) and len(out) < 8 and log[at][2] != OPEN:
                    if log[at][2] == DONE:
                        out.append([log[at][0], log[at][1]])
                    at += 1
                t["pos"][k] = at
                if out:
                    got[str(k)] = out
            t["done"].append(["poll", got])

        def finish(p: int, outcome: str) -> None:
            t = txns.pop(p)
            committed = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
            for _, rec in t["sent"]:
                rec[2] = DONE if committed else DROPPED
            for k in sorted({k for k, _ in t["sent"]}):
                append(k, -1, DROPPED)  # the commit or abort marker
            if outcome == "ok":
                pos[p] = t["pos"]
            w({"process": p, "type": outcome, "f": t["f"], "value": t["done"]})

        while w.n < n_ops - 2 * keys - 4:
            idle = [p for p in procs if p not in txns]
            if idle and (not txns or rng.random() < 0.3):
                start(rng.choice(idle))
                continue
            p = rng.choice(list(txns))
            t = txns[p]
            if len(t["done"]) < len(t["plan"]):
                step(p)
                continue
            r = rng.random()
            outcome = "ok" if r < 0.88 else "fail" if r < 0.98 else "info"
            finish(p, outcome)
            if outcome == "info":  # an indeterminate client is retired; a new process takes its place
                procs[procs.index(p)] = proc_seq
                proc_seq += 1
        for p in list(txns):
            t = txns[p]
            while len(t["done"]) < len(t["plan"]):
                step(p)
            finish(p, "ok")
        keys_all = list(range(keys))
        w({"process": 999, "type": "invoke", "f": "assign", "value": keys_all, "final": True})
        w({"process": 999, "type": "ok", "f": "assign", "value": keys_all, "final": True})
        for k, log in enumerate(logs):
            done = [[o, x] for o, x, state in log if state == DONE]
            for s in range(0, len(done), DRAIN_BATCH):
                w({"process": 999, "type": "invoke", "f": "poll", "value": [["poll"]], "final": True})
                w({"process": 999, "type": "ok", "f": "poll", "final": True,
                   "value": [["poll", {str(k): done[s:s + DRAIN_BATCH]}]]})
    return w.n


def _generate_apart(path: Path, n_ops: int, txn: bool = False) -> None:
    """`generate` (or `generate_txn`) in a child process: it keeps every value it sent (gigabytes at
    10^7 ops), which would otherwise stand as this process's peak RSS in the rows of our check."""
    fn = "generate_txn" if txn else "generate"
    subprocess.run([sys.executable, "-c", f"import sys; from pathlib import Path; from results.bench import {fn}; "
                    f"{fn}(Path(sys.argv[1]), int(sys.argv[2]))", str(path), str(n_ops)],
                   check=True, cwd=Path(__file__).resolve().parents[1])


def jvm_peak_mb() -> float:
    """Peak RSS of this process's children (the Spark JVM)."""
    return _children_hwm(os.getpid())


def _hwm_mb(status: str) -> float:
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed_process(cmd: list[str], timeout: float = 3600, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run `cmd`, return its wall time, exit code and peak RSS (VmHWM of it and its children, polled)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peak = 0.0
    try:
        while proc.poll() is None:
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peak = max(peak, _hwm_mb(status) + _children_hwm(proc.pid))
            except OSError:
                pass
            if time.perf_counter() - t > timeout:
                proc.kill()
            time.sleep(0.1)
    finally:
        if proc.poll() is None:  # the benchmark was stopped: stop the check it timed too (it cleans up)
            proc.terminate()
            proc.wait()
    out = proc.stdout.read() if proc.stdout else ""
    return {"wall_s": round(time.perf_counter() - t, 2), "exit": proc.returncode, "peak_mb": round(peak, 1),
            "stdout_tail": out[-300:]}


def _children_hwm(pid: int) -> float:
    total = 0.0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
            except OSError:
                continue
            if f"PPid:\t{pid}\n" in status:
                total += _hwm_mb(status)
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


def python_reference(history: Path) -> tuple[float, float, dict[str, int]]:
    """`results.reference` on `history` in this process: wall seconds, how far this process's peak
    RSS rose meanwhile (MB; 0 when it stayed under an earlier peak, so a lower bound), and what it found."""
    from results.reference import anomalies

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    found = anomalies(history)
    dt = time.perf_counter() - t
    return dt, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024, found


REAL = Path(__file__).resolve().parents[1] / "tests" / "results" / "fixtures" / "valid-kill-controller"
def _shared_tool(*parts: str) -> Path:
    """A tool under `$CHAOS_SHARED_TOOLS`, as the tests find it (`tests/checks/conftest.py`); unset, the
    tools directory this project's own machines keep beside the checkout."""
    base = os.environ.get("CHAOS_SHARED_TOOLS") or Path(__file__).resolve().parents[2] / "shared" / "tools"
    return Path(base).joinpath(*parts)


JEPSEN = Path(os.environ["JEPSEN_KAFKA_CHECK"]) if "JEPSEN_KAFKA_CHECK" in os.environ else _shared_tool(
    "jepsen-kafka", "check")
CHAOS = str(Path(sys.executable).parent / "chaos")


def _jepsen(history: Path, heap: str | None = None) -> dict[str, object] | None:
    """Jepsen's checker on `history` in a fresh JVM, as it is used (`heap`: its -Xmx, else the build's 2g)."""
    if not JEPSEN.is_file() or not shutil.which("java"):
        return None
    env = {**os.environ, "JAVA_OPTS": f"-Xmx{heap}"} if heap else None
    return timed_process([str(JEPSEN), "--summary", str(history)], env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/check.json"))
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000")
    ap.add_argument("--txn-sizes", default="10000,1000000",
                    help="transactional histories (`generate_txn`: sends and polls in transactions that "
                         "commit, abort or end unknown; the cycle search has real work)")
    ap.add_argument("--jepsen-txn-heap", default="6g",
                    help="Jepsen's -Xmx for the transactional rows (its realtime and dependency graphs "
                         "need more than the build's 2g at 10^6 ops)")
    ap.add_argument("--reference-max-ops", type=int, default=2_000_000,
                    help="run the Python reference only up to this size")
    ap.add_argument("--jepsen-max-ops", type=int, default=1_000_000,
                    help="run Jepsen's checker only up to this size (it holds the whole history in one heap: "
                         "~6 GB at 10^6 ops, so 10^7 does not fit this machine)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--runs", type=int, default=20, help="run directories for the many-runs comparison")
    ap.add_argument("--run-ops", type=int, default=5000, help="ops per run directory there")
    ap.add_argument("--repeat", type=int, default=3,
                    help="warm checks of each history up to 10^5 ops (the median is check_s)")
    ap.add_argument("--real-run", type=Path, default=Path("store/latest"),
                    help="a stored `chaos run` directory (history, replica dumps, test.json): the real-history "
                         "rows (fresh and warm check with its replica dumps, Jepsen's checker, the run's own "
                         "check phase, N copies in one call); skipped when it does not exist")
    ap.add_argument("--real-copies", type=int, default=20, help="copies of the real run checked in one call")
    ap.add_argument("--only-real", action="store_true", help="only the real-history rows")
    ap.add_argument("--separate", type=int, default=None,
                    help="how many of them to check as separate processes (default: all; the rest is extrapolated)")
    args = ap.parse_args()
    # `timeout`, a CI's cancel and `kill` stop with SIGTERM: unwind as Ctrl-C does, so the generated
    # histories and the check's working files in the temporary directory are removed
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    from results.check import check_run
    from results.spark import get_spark

    doc: dict[str, object] = {"master": args.master, "cores": os.cpu_count(), "jepsen": str(JEPSEN)}
    t0 = time.perf_counter()
    # the session's JIT is chosen by the largest history it will check (results.spark.SMALL_BYTES)
    sizes = [int(n) for n in f"{args.sizes},{args.txn_sizes}".split(",") if n]
    get_spark(args.master, max(sizes, default=10_000) * BYTES_PER_OP)
    doc["spark_startup_s"] = round(time.perf_counter() - t0, 2)
    # the first job in a fresh JVM pays class loading and JIT; measure it once on a tiny history
    with tempfile.TemporaryDirectory() as d:
        generate(Path(d) / "history.jsonl", 1000)
        t = time.perf_counter()
        check_run(Path(d), spark_master=args.master, perf=False, elle_cli="")
        doc["warmup_check_s"] = round(time.perf_counter() - t, 2)
    print(f"spark start-up {doc['spark_startup_s']} s, first check of 10^3 ops {doc['warmup_check_s']} s", flush=True)
    rows: list[dict] = []  # type: ignore[type-arg]
    doc["runs"] = rows

    def save() -> None:
        doc["fit"] = fit([r for r in rows if r["name"] != "real" and not str(r["name"]).startswith("txn")])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2))

    if args.real_run.is_dir():
        doc["real_run"] = real_run_rows(args.real_run.resolve(), args.real_copies, args.master)
        save()
        print(json.dumps(doc["real_run"]), flush=True)
    else:
        doc["real_run"] = {"skipped": f"{args.real_run} is not a run directory (make run links store/latest)"}
    if args.only_real:
        save()
        return 0
    cases: list[tuple[str, int | None, bool]] = [("real", None, False)]
    cases += [(f"{int(n):.0e}", int(n), False) for n in args.sizes.split(",") if n]
    cases += [(f"txn-{int(n):.0e}", int(n), True) for n in args.txn_sizes.split(",") if n]
    for name, n, txn in cases:
        with tempfile.TemporaryDirectory() as d:
            run = Path(d)
            tg = time.perf_counter()
            if n is None:
                shutil.copy(REAL / "history.jsonl", run / "history.jsonl")
                shutil.copy(REAL / "test.json", run / "test.json")
            else:
                _generate_apart(run / "history.jsonl", n, txn)
            gen_s = time.perf_counter() - tg
            ops = len((run / "history.jsonl").read_bytes().splitlines())
            # the first check of a new size still warms the JIT up; a warm session has done it before:
            # repeat small checks and take the median (every time is kept in `check_repeats_s`)
            times = []
            for _ in range(args.repeat if n is None or n <= 100_000 else 1):
                t = time.perf_counter()
                r = check_run(run, spark_master=args.master, perf=False, elle_cli="")
                times.append(time.perf_counter() - t)
            dt = sorted(times)[len(times) // 2]
            row: dict[str, object] = {
                "name": name,
                "ops": ops,
                "check_repeats_s": [round(x, 2) for x in times],
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
            if txn:
                row["cycles"] = {t: r.anomalies[t]["count"] for t in ("G0", "G1c", "G0-realtime", "G1c-realtime")
                                 if t in r.anomalies}
            rows.append(row)
            if n is not None and n > args.reference_max_ops:
                row["python_reference"] = {"skipped": f"above --reference-max-ops {args.reference_max_ops}"}
            else:
                _reference_columns(row, run, times, dt, r)
            if n is None or n <= 10_000:
                row["fresh_process"] = timed_process(
                    [CHAOS, "check", "--no-perf", "--elle-cli", "", "--spark-master", args.master, str(run)])
            heap = args.jepsen_txn_heap if txn else None
            jep = _jepsen(run / "history.jsonl", heap) if n is None or n <= args.jepsen_max_ops else None
            if n is not None and n > args.jepsen_max_ops:
                row["jepsen"] = {"skipped": f"above --jepsen-max-ops {args.jepsen_max_ops}: Jepsen's checker holds "
                                            "the whole history in one heap (~6 GB at 10^6 ops)"}
            elif jep is not None:
                row["jepsen"] = jep if heap is None else {**jep, "heap": heap}
                row["ratio_ours_to_jepsen"] = round(dt / float(jep["wall_s"]), 2)  # type: ignore[arg-type]
            print(json.dumps(row), flush=True)
            save()
    if args.runs > 0:
        doc["many_runs"] = many_runs(args.runs, args.run_ops, args.separate, args.master)
    save()
    print(json.dumps(doc.get("many_runs")), flush=True)
    print(f"fit: {doc['fit']}; written to {args.out}")
    return 0


def _reference_columns(row: dict[str, object], run: Path, times: list[float], dt: float, r: Any) -> None:
    """The Python reference beside our check: as many times as ours, the median kept (the first call
    also imports the module)."""
    refs = [python_reference(run / "history.jsonl") for _ in times]
    ref_s = sorted(x[0] for x in refs)[len(refs) // 2]
    ref_mb, ref_found = max(x[1] for x in refs), refs[-1][2]
    row["python_reference_s"] = round(ref_s, 2)
    row["python_reference_repeats_s"] = [round(x[0], 2) for x in refs]
    row["python_reference_peak_growth_mb"] = round(ref_mb, 1)
    row["python_reference_anomalies"] = ref_found
    # the reference leaves out replica dumps and commits (results/reference.py): compare the rest
    left_out = {"divergent-replicas", "lost-commit", "commit-regression", "reread-committed"}
    row["python_reference_agrees"] = set(ref_found) == set(r.anomalies) - left_out
    row["ratio_ours_to_python_reference"] = round(dt / ref_s, 2)
    print(f"{row['name']}: ours (warm) {dt:.2f} s, Python reference {ref_s:.2f} s, ratio "
          f"{row['ratio_ours_to_python_reference']}", flush=True)


def _copy_run(src: Path, dest: Path) -> Path:
    """What a check reads of a stored run: its history, test.json and replica dumps."""
    dest.mkdir(parents=True)
    for name in ("history.jsonl", "test.json"):
        if (src / name).is_file():
            shutil.copy(src / name, dest / name)
    if (src / "replicas").is_dir():
        shutil.copytree(src / "replicas", dest / "replicas")
    return dest


def real_run_rows(src: Path, copies: int, master: str) -> dict[str, object]:
    """A real `chaos run` directory (its replica dumps included): the check phase that run itself
    took (test.json `phases.check`, the warm-up's work during the workload not counted), a fresh
    `chaos check` process, Jepsen's checker on the same history right after it, our check on this
    process's warm session, and `copies` copies of it judged by one `check_runs` call (warm) and by
    one `chaos check` process."""
    from results.check import check_run, check_runs

    meta = json.loads((src / "test.json").read_text()) if (src / "test.json").is_file() else {}
    out: dict[str, object] = {"run": str(src), "ops": len((src / "history.jsonl").read_bytes().splitlines()),
                              "replica_files": len(list(src.glob("replicas/*/*.jsonl"))),
                              "check_phase_of_the_run_s": (meta.get("phases") or {}).get("check")}
    with tempfile.TemporaryDirectory() as d:
        run = _copy_run(src, Path(d) / "run")
        local = master == "local[*]"
        fresh = [CHAOS, "check", "--no-perf", "--elle-cli", "", "--no-server",
                 *(() if local else ("--spark-master", master)), str(run)]
        out["fresh_process"] = timed_process(fresh)
        jep = _jepsen(run / "history.jsonl")
        if jep is not None:
            out["jepsen"] = jep
            out["ratio_fresh_to_jepsen"] = round(float(out["fresh_process"]["wall_s"])  # type: ignore[index]
                                                 / float(jep["wall_s"]), 2)  # type: ignore[arg-type]
        served = [c for c in fresh if c != "--no-server"]
        if local:  # a fresh process on the shared check server (results/server.py), once it is warm
            on = {**os.environ, "CHAOS_CHECK_SERVER": "1"}
            out["server_first_process"] = timed_process(served, env=on)  # starts the server if none runs
            out["server_warm_process"] = timed_process(served, env=on)
            if jep is not None:
                out["ratio_server_warm_to_jepsen"] = round(
                    float(out["server_warm_process"]["wall_s"]) / float(jep["wall_s"]), 2)  # type: ignore[index,arg-type]
        times = []
        for _ in range(3):
            t = time.perf_counter()
            r = check_run(run, spark_master=master, perf=False, elle_cli="")
            times.append(time.perf_counter() - t)
        out["warm_s"] = round(sorted(times)[1], 2)
        out["warm_repeats_s"] = [round(x, 2) for x in times]
        out["warm_phases_s"] = r.timings
        out["valid"] = r.valid
        dirs = [run] + [_copy_run(src, Path(d) / f"copy-{i:02d}") for i in range(1, copies)]
        t = time.perf_counter()
        results = check_runs(dirs, spark_master=master, perf=False, elle_cli="")
        out["copies"] = copies
        out["copies_one_call_warm_s"] = round(time.perf_counter() - t, 2)
        out["copies_all_valid"] = all(getattr(x, "valid", None) is True for x in results)
        out["copies_one_process"] = timed_process([*fresh[:-1], *map(str, dirs)])
        if local:
            out["copies_one_process_server_warm"] = timed_process([*served[:-1], *map(str, dirs)], env=on)
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return out


def many_runs(n: int, ops: int, separate: int | None, master: str) -> dict[str, object]:
    """N run directories of `ops` ops: one job (warm), one `chaos check` process, N processes."""
    from results.check import check_runs

    with tempfile.TemporaryDirectory() as d:
        dirs = []
        for i in range(n):
            run = Path(d) / f"run-{i:02d}"
            run.mkdir()
            generate(run / "history.jsonl", ops, seed=i + 1)
            dirs.append(run)
        t = time.perf_counter()
        results = check_runs(dirs, spark_master=master, perf=False, elle_cli="")
        warm = time.perf_counter() - t
        one = timed_process([CHAOS, "check", "--no-perf", "--elle-cli", "", "--spark-master", master,
                             *map(str, dirs)])
        k = n if separate is None else min(separate, n)
        t = time.perf_counter()
        for run in dirs[:k]:
            timed_process([CHAOS, "check", "--no-perf", "--elle-cli", "", "--spark-master", master, str(run)])
        sep = time.perf_counter() - t
        ref_t = sum(python_reference(run / "history.jsonl")[0] for run in dirs)  # one after another
        jep_t = None
        if JEPSEN.is_file() and shutil.which("java"):
            t = time.perf_counter()
            for run in dirs[:k]:
                _jepsen(run / "history.jsonl")
            jep_t = time.perf_counter() - t
        return {
            "runs": n, "ops_per_run": ops, "all_valid": all(getattr(r, "valid", None) is True for r in results),
            "one_job_warm_s": round(warm, 2), "one_process_s": one["wall_s"], "one_process_peak_mb": one["peak_mb"],
            "separate_processes": k, "separate_s": round(sep, 2), "separate_extrapolated_s": round(sep * n / k, 2),
            "python_reference_s": round(ref_t, 2), "ratio_ours_to_python_reference": round(warm / ref_t, 2),
            "jepsen_separate_s": round(jep_t, 2) if jep_t is not None else None,
            "jepsen_extrapolated_s": round(jep_t * n / k, 2) if jep_t is not None else None,
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }


if __name__ == "__main__":
    raise SystemExit(main())
