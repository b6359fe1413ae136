"""librdkafka's own integration tests against our brokers: the group or the transaction tests, one test
number at a time.

Why: librdkafka's `tests/` exercise a consumer group the way a real client does (rebalances, static
members, commits during rebalances, close), and transactions (init, commit, abort, send offsets,
read_committed consumers); passing them against one broker and against three is issue 17's and
issue 27's acceptance criterion.

librdkafka's source is not part of this project: clone github.com/confluentinc/librdkafka (a release
tag, e.g. v2.15.0), build it as below, and name the tree with `--librdkafka DIR` or `$LIBRDKAFKA_SRC`
(one of the two is required); the tests are its `tests/` directory.

What it does:
- builds nothing: point --librdkafka at a tree where `make libs` and `make -C tests build` ran
  (`./configure --disable-ssl --disable-gssapi --disable-zstd --disable-curl`);
- picks the tests (unless --tests names them): the broker tests (not `TEST_F_LOCAL`, not `*_mock`,
  not share consumers) whose source subscribes, commits, reads committed offsets or closes a group
  consumer (`--suite groups`, the default), or calls the transactional API (`--suite txn`:
  `rd_kafka_init_transactions`, begin/commit/abort, send_offsets_to_transaction, C or C++);
- starts one broker, or three with a local ZooKeeper (default RF 3, min.insync.replicas 1), as
  processes (`tests/brokerlib.py`) with `num.partitions=4` and `auto.create.topics.enable=true`, as
  librdkafka's own test clusters;
- runs `test-runner -L` with `TESTS=<number>` and `TEST_KAFKA_VERSION=2.8.0` for each, and writes
  pass/fail/skip per test (with the failure lines) to --out as it goes.

    PYTHONPATH=cluster-impl .venv/bin/python cluster-impl/bench/librdkafka_tests.py --brokers 1 \\
        --librdkafka ~/src/librdkafka --out bench-results/librdkafka-1.json [--tests 0102 0030]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(HERE), str(HERE / "replication")]
from brokerlib import BrokerProc  # noqa: E402
from zklib import LocalZooKeeper  # noqa: E402

GROUP_CALLS = re.compile(r"subscribe\s*\(|commit|consumer_close|committed")
TXN_CALLS = re.compile(r"(init|begin|commit|abort)_transaction|send_offsets_to_transaction|"
                       r"(Init|Begin|Commit|Abort)Transaction|SendOffsetsToTransaction")
BROKER_OPTS = ["num.partitions=4", "auto.create.topics.enable=true"]


def group_tests(tests_dir: Path, calls: re.Pattern[str] = GROUP_CALLS) -> list[str]:
    """Test numbers of the broker tests whose source makes one of `calls` (see the module doc)."""
    src = (tests_dir / "test.c").read_text()
    broker: set[str] = set()
    for num, name, flags in re.findall(r"_TEST\(\s*(\d{4})_(\w+)\s*,\s*([^)]*)\)", src):
        if "TEST_F_LOCAL" in flags.split(",")[0] or "mock" in name or "share" in name or num.startswith("8"):
            continue
        broker.add(num)
    picked = []
    for num in sorted(broker):
        files = [*tests_dir.glob(f"{num}-*.c"), *tests_dir.glob(f"{num}-*.cpp")]
        text = "".join(f.read_text(errors="replace") for f in files)
        if calls.search(text):
            picked.append(num)
    return picked


def start_cluster(root: Path, n: int, stack: ExitStack) -> list[BrokerProc]:
    if n == 1:
        b = BrokerProc(root / "b1", overrides=list(BROKER_OPTS)).start()
        stack.callback(b.kill)
        return [b]
    zk = LocalZooKeeper(root).start()
    stack.callback(zk.stop)
    brokers = []
    for i in range(1, n + 1):
        b = BrokerProc(root / f"b{i}", overrides=[
            f"broker.id={i}", f"zookeeper.connect={zk.connect}", "default.replication.factor=3",
            "offsets.topic.replication.factor=3", *BROKER_OPTS])  # min.insync.replicas stays 1: several
        # tests create topics with replication factor 1 and produce with acks=all
        brokers.append(b.start())
        stack.callback(b.kill)
    return brokers


def run_one(tests_dir: Path, num: str, conf: Path, timeout_s: float, logs: Path | None = None) -> dict[str, Any]:
    env = dict(os.environ, TESTS=num, TEST_KAFKA_VERSION="2.8.0", RDKAFKA_TEST_CONF=str(conf),
               LD_LIBRARY_PATH=f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}")
    t0 = time.monotonic()
    try:
        p = subprocess.run(["./test-runner", "-L"], cwd=tests_dir, env=env, capture_output=True, timeout=timeout_s)
        out, rc = (p.stdout + p.stderr).decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = ((e.stdout or b"") + (e.stderr or b"")).decode(errors="replace"), -1
    took = round(time.monotonic() - t0, 1)
    clean = re.sub(r"\x1b\[[0-9;]*m", "", out)
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{num}.log").write_text(clean)
    summary = [ln for ln in clean.splitlines() if re.search(rf"\b{num}_\w+\s+\|\s+\w+", ln)]
    ran = any(re.search(r"\|\s+PASSED\s+\|", ln) for ln in summary)  # the `_mock`/`_local` siblings are
    # listed as SKIPPED (filtered out by -L)
    verdict = "timeout" if rc == -1 else "fail" if rc != 0 else "pass" if ran else "skip"
    fails = [ln.strip() for ln in clean.splitlines() if re.search(r"FAIL|Assertion|TEST FAILURE", ln)][:8]
    return {"test": num, "verdict": verdict, "rc": rc, "seconds": took, "summary": summary, "failures": fails}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--librdkafka", type=Path, default=os.environ.get("LIBRDKAFKA_SRC") or None,
                    help="a built librdkafka source tree (default: $LIBRDKAFKA_SRC)")
    ap.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    ap.add_argument("--suite", choices=("groups", "txn"), default="groups", help="which tests (default groups)")
    ap.add_argument("--tests", nargs="*", help="test numbers (default: the suite's tests)")
    ap.add_argument("--skip", nargs="*", default=[], help="test numbers to leave out")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per test")
    ap.add_argument("--out", type=Path, default=Path("bench-results/librdkafka.json"))
    ap.add_argument("--logs", type=Path, help="keep each test's output here (<number>.log)")
    args = ap.parse_args()
    if args.librdkafka is None:
        ap.error("name librdkafka's built source tree: --librdkafka DIR or $LIBRDKAFKA_SRC "
                 "(github.com/confluentinc/librdkafka; this script's docstring says how to build it)")
    tests_dir = args.librdkafka / "tests"
    calls = TXN_CALLS if args.suite == "txn" else GROUP_CALLS
    wanted = [t for t in (args.tests or group_tests(tests_dir, calls)) if t not in args.skip]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lrk-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        brokers = start_cluster(root, args.brokers, stack)
        conf = root / "test.conf"
        conf.write_text("bootstrap.servers=" + ",".join(b.bootstrap for b in brokers) + "\n")
        for num in wanted:
            for b in brokers:  # a broker that died in a test comes back for the next
                if not b.alive():
                    b.start()
            r = run_one(tests_dir, num, conf, args.timeout, args.logs)
            results.append(r)
            print(f"{num}: {r['verdict']} ({r['seconds']} s)", flush=True)
            counts = {v: sum(1 for x in results if x["verdict"] == v) for v in ("pass", "fail", "skip", "timeout")}
            args.out.write_text(json.dumps({"brokers": args.brokers, "librdkafka": str(args.librdkafka),
                                            "load_1min": os.getloadavg()[0], "counts": counts,
                                            "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
