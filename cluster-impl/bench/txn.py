"""`make bench-txn`: transactional produce on three brokers, beside acks=all. A benchmark, not a test.

Three broker processes with a local ZooKeeper (RF 3, min.insync.replicas 2), one topic of three
partitions. For 1, 10 and 100 records per transaction, one confluent-kafka (librdkafka) transactional
producer runs transactions for `--seconds`: begin, produce the records (100 bytes each, round-robin over
the partitions), flush, commit. Per transaction it records the commit latency — flushing the records
(their partitions added to the transaction, AddPartitionsToTxn, and verified by each leader, KIP-890)
plus `commit_transaction()` (EndTxn: PrepareCommit replicated in `__transaction_state`) — and its two
parts; per run the records per second. Twice: back to back, and with `--gap-ms` between transactions.
Back to back, the next transaction's AddPartitionsToTxn finds the previous one still completing (its
markers and CompleteCommit being replicated) and librdkafka retries CONCURRENT_TRANSACTIONS after 20 ms,
as it would against Kafka; the gap shows the commit latency of a transaction that does not wait for
its predecessor. Beside each, the same producer without a transactional id (idempotent, acks=all)
sends the same groups of records and flushes after each group: the non-transactional counterpart.

Goal (issue 27): a 100-record transaction commits in under 20 ms p50 on loopback.

    PYTHONPATH=cluster-impl .venv/bin/python cluster-impl/bench/txn.py --out bench-results/txn.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
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

quiet = logging.getLogger("bench-txn-quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
TOPIC = "bench-txn"
PARTITIONS = 3
VALUE = b"x" * 100


def start_cluster(root: Path, stack: ExitStack) -> list[BrokerProc]:
    zk = LocalZooKeeper(root).start()
    stack.callback(zk.stop)
    brokers = []
    for i in (1, 2, 3):
        b = BrokerProc(root / f"b{i}", overrides=[
            f"broker.id={i}", f"zookeeper.connect={zk.connect}", "default.replication.factor=3",
            "min.insync.replicas=2", "offsets.topic.replication.factor=3", "transaction.state.log.num.partitions=10",
            "offsets.topic.num.partitions=10", "auto.create.topics.enable=false"])
        brokers.append(b.start())
        stack.callback(b.kill)
    return brokers


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    deadline = time.monotonic() + 60
    while len(admin.list_topics(timeout=10).brokers) < 3:
        if time.monotonic() > deadline:
            raise SystemExit("the three brokers did not register")
        time.sleep(0.5)
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
        f.result(30)
    while True:
        md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
        if len(md) == PARTITIONS and all(len(p.isrs) == 3 and p.leader >= 0 for p in md.values()):
            return
        if time.monotonic() > deadline:
            raise SystemExit("the topic's ISRs did not fill")
        time.sleep(0.5)


def percentiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    s = sorted(xs)
    return {"n": len(s), "p50": round(s[len(s) // 2], 2), "p99": round(s[min(len(s) - 1, int(len(s) * 0.99))], 2),
            "mean": round(statistics.fmean(s), 2), "max": round(s[-1], 2)}


def run(bootstrap: str, size: int, seconds: float, transactional: bool, txn_id: str,
        gap_s: float = 0.0) -> dict[str, Any]:
    from confluent_kafka import KafkaException, Producer

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 0, "logger": quiet}
    if transactional:
        conf["transactional.id"] = txn_id
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
    group_ms: list[float] = []  # commit (transactional: flush + EndTxn) or flush (not) of each group
    flush_ms: list[float] = []
    end_ms: list[float] = []
    errors: list[str] = []
    records = 0
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        if gap_s:
            time.sleep(gap_s)
        try:
            if transactional:
                p.begin_transaction()
            for i in range(size):
                p.produce(TOPIC, VALUE, partition=(n + i) % PARTITIONS)
            start = time.perf_counter()
            if p.flush(30):
                errors.append("flush left records unsent")
            mid = time.perf_counter()
            if transactional:
                p.commit_transaction(30)
        except KafkaException as e:
            errors.append(str(e))
            if transactional:
                p.abort_transaction(30)
            continue
        end = time.perf_counter()
        group_ms.append((end - start) * 1000)
        flush_ms.append((mid - start) * 1000)
        end_ms.append((end - mid) * 1000)
        records += size
        n += size
    elapsed = time.perf_counter() - t0
    p.flush(10)
    out = {"records_per_txn": size, "transactional": transactional, "gap_ms": round(gap_s * 1000),
           "seconds": round(elapsed, 1), "groups": len(group_ms), "records": records,
           "records_per_s": round(records / elapsed), "errors": errors[:5], "error_count": len(errors)}
    if transactional:
        return out | {"commit_ms": percentiles(group_ms), "flush_ms": percentiles(flush_ms),
                      "end_txn_ms": percentiles(end_ms)}
    return out | {"flush_ms": percentiles(group_ms)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("bench-results/txn.json"))
    ap.add_argument("--seconds", type=float, default=15.0, help="per size and mode")
    ap.add_argument("--sizes", type=int, nargs="*", default=[1, 10, 100])
    ap.add_argument("--gap-ms", type=float, default=50.0, help="between transactions, in the spaced runs")
    args = ap.parse_args()
    results: list[dict[str, Any]] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as d, ExitStack() as stack:
        brokers = start_cluster(Path(d), stack)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        create_topic(bootstrap)
        for size in args.sizes:
            for transactional, gap in ((True, 0.0), (True, args.gap_ms / 1000), (False, 0.0)):
                r = run(bootstrap, size, args.seconds, transactional, f"bench-txn-{size}", gap)
                results.append(r)
                key = "commit_ms" if transactional else "flush_ms"
                what = f"txn, gap {r['gap_ms']} ms" if transactional else "flush"
                print(f"{size:>3} records/{what}: {r['records_per_s']} records/s, {key} {r[key]}"
                      + (f" (flush {r['flush_ms']['p50']}, EndTxn {r['end_txn_ms']['p50']} p50)" if transactional
                         else ""), flush=True)
    out = {"brokers": 3, "partitions": PARTITIONS, "replication_factor": 3, "min_insync_replicas": 2,
           "value_bytes": len(VALUE), "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0],
           "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
