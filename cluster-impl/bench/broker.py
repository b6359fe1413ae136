"""`make bench-broker`: one standalone broker on loopback, confluent-kafka, 100-byte values.

Measures produce throughput (messages/s, MB/s) and per-message latency p50/p99 (enqueue → delivery
report) with acks=1, with and without fsync per append, then consume throughput. Writes JSON to
--out and prints a table. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from brokerlib import BrokerProc  # noqa: E402

quiet = logging.getLogger("bench-quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
VALUE = b"x" * 100


def produce(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 500000, "logger": quiet})
    lat: list[float] = []
    t0 = time.perf_counter()
    for _ in range(n):
        sent = time.perf_counter()
        while True:
            try:
                p.produce(topic, VALUE, partition=0,
                          on_delivery=lambda e, m, s=sent: lat.append(time.perf_counter() - s))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    dt = time.perf_counter() - t0
    lat.sort()
    return {"messages": n, "seconds": dt, "msgs_per_s": n / dt, "mb_per_s": n * len(VALUE) / dt / 1e6,
            "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3,
            "mean_ms": statistics.fmean(lat) * 1e3}


def consume(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 * 1024 * 1024, "logger": quiet})
    c.assign([TopicPartition(topic, 0, 0)])
    got, t0 = 0, time.perf_counter()
    while got < n and time.perf_counter() - t0 < 120:
        got += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    return {"messages": got, "seconds": dt, "msgs_per_s": got / dt, "mb_per_s": got * len(VALUE) / dt / 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/broker.json"))
    ap.add_argument("--messages", type=int, default=200_000)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    results: dict[str, object] = {"value_bytes": len(VALUE), "acks": 1}
    for name, overrides, n in (("no-fsync", [], args.messages), ("fsync-per-append", ["flush.messages=1"],
                                                                   max(args.messages // 4, 1000))):
        with tempfile.TemporaryDirectory() as d:
            b = BrokerProc(Path(d) / "data", overrides=overrides).start()
            try:
                admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})
                for f in admin.create_topics([NewTopic("bench", 1, 1)]).values():
                    f.result(15)
                results[f"produce/{name}"] = produce(b.bootstrap, "bench", n)
                if name == "no-fsync":
                    results["consume"] = consume(b.bootstrap, "bench", n)
            finally:
                b.kill()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    for k, v in results.items():
        if isinstance(v, dict):
            print(f"{k:26s} " + "  ".join(f"{kk}={vv:.1f}" if isinstance(vv, float) else f"{kk}={vv}"
                                           for kk, vv in v.items()))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
