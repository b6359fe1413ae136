"""Replication cost as partitions are added: acks=all latency and idle ISR stability.

For each partition count (1, 40, 160 by default) a fresh cluster of three brokers and a ZooKeeper
on loopback (replication factor 3, min.insync.replicas=2, the default replica.lag.time.max.ms of
10 s), one topic with that many partitions:
- acks=all latency: one producer (confluent-kafka, linger.ms=0) sends one 100-byte message at a
  time, round-robin over every partition, and waits for its delivery report; p50/p99/max in ms;
- idle ISR stability (largest count only): no traffic for --idle seconds; every ISR change is a
  version bump of a partition's state znode, and every shrink a "shrinking ISR" line in the brokers'
  logs (run at INFO). Reported per minute.

    python cluster-impl/bench/replication.py --out bench-results/replication.json
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(HERE), str(HERE / "replication")]
from brokerlib import BrokerProc  # noqa: E402
from zklib import LocalZooKeeper  # noqa: E402

quiet = logging.getLogger("bench-quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def wait(pred: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.perf_counter() + timeout
    while not pred():
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def full_isr(admin: Any, topic: str, n: int) -> bool:
    md = admin.list_topics(topic, timeout=10).topics.get(topic)
    parts = md.partitions if md is not None else {}
    return len(parts) == n and all(len(p.isrs) == 3 for p in parts.values())


def state_versions(zk_connect: str, topic: str, n: int) -> dict[int, int]:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=10)
    try:
        return {p: zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version for p in range(n)}
    finally:
        zk.stop()
        zk.close()


def shrink_lines(brokers: list[BrokerProc]) -> int:
    return sum(b.log_text().count("shrinking ISR") for b in brokers)


def latency(boot: str, topic: str, n: int, messages: int) -> list[float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 0, "message.timeout.ms": 60000,
                  "logger": quiet})
    done: list[Any] = []
    out = []
    for i in range(messages + 20):
        done.clear()
        t = time.perf_counter()
        p.produce(topic, b"x" * 100, partition=i % n, on_delivery=lambda e, m: done.append(e))
        while not done:
            p.poll(0.001)
        if done[0] is not None:
            raise SystemExit(f"delivery failed: {done[0]}")
        if i >= 20:  # the first ones include connection set-up
            out.append((time.perf_counter() - t) * 1000)
    p.flush(10)
    return out


def run_one(root: Path, n: int, messages: int, idle_s: float) -> dict[str, float]:
    from confluent_kafka.admin import AdminClient, NewTopic

    os.environ["LOGBROKER_TEST_LOG_LEVEL"] = "INFO"
    zk = LocalZooKeeper(root).start()
    brokers = [BrokerProc(root / f"b{i}", overrides=[f"broker.id={i}", f"zookeeper.connect={zk.connect}",
                                                      "default.replication.factor=3", "min.insync.replicas=2"])
               for i in (1, 2, 3)]
    topic = f"lat{n}"
    out: dict[str, float] = {}
    try:
        for b in brokers:
            b.start()
        boot = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": boot, "logger": quiet})
        wait(lambda: len(admin.list_topics(timeout=10).brokers) == 3, 30, "brokers")
        for f in admin.create_topics([NewTopic(topic, n, 3)]).values():
            f.result(30)
        wait(lambda: full_isr(admin, topic, n), 120, f"a full ISR on {n} partitions")
        lat = latency(boot, topic, n, messages)
        out[f"acks_all_p50_ms_{n}p"] = statistics.median(lat)
        out[f"acks_all_p99_ms_{n}p"] = percentile(lat, 0.99)
        out[f"acks_all_max_ms_{n}p"] = max(lat)
        if idle_s > 0:
            wait(lambda: full_isr(admin, topic, n), 60, "a full ISR after the latency run")
            before, shrinks_before = state_versions(zk.connect, topic, n), shrink_lines(brokers)
            time.sleep(idle_s)
            after, shrinks_after = state_versions(zk.connect, topic, n), shrink_lines(brokers)
            changes = sum(after[p] - before[p] for p in range(n))
            out[f"idle_isr_changes_per_min_{n}p"] = changes * 60 / idle_s
            out[f"idle_isr_shrinks_per_min_{n}p"] = (shrinks_after - shrinks_before) * 60 / idle_s
    finally:
        for b in brokers:
            b.kill()
        zk.stop()
    return out


def run(counts: list[int], messages: int, idle_s: float) -> dict[str, float]:
    res: dict[str, float] = {}
    for n in counts:
        with tempfile.TemporaryDirectory() as d:
            res.update(run_one(Path(d), n, messages, idle_s if n == max(counts) else 0))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("bench-results/replication.json"))
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 40, 160])
    ap.add_argument("--messages", type=int, default=500)
    ap.add_argument("--idle", type=float, default=60.0, help="seconds without traffic (largest count only)")
    args = ap.parse_args()
    res = run(args.partitions, args.messages, args.idle)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({k: round(v, 2) for k, v in res.items()}, indent=2))
    for k, v in res.items():
        print(f"{k:40s} {v:10.2f}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
