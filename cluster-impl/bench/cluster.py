"""`make bench-cluster-impl`: three brokers and a ZooKeeper on loopback, replication factor 3.

Measures acks=all produce throughput (min.insync.replicas=2, 100-byte values, confluent-kafka), and
failover time: SIGKILL the partition leader, then time until the first acknowledged produce, with
the default ZooKeeper session timeout (6 s) — the dead leader is noticed only when its session
expires. Writes JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(HERE), str(HERE / "replication")]
from brokerlib import BrokerProc  # noqa: E402
from zklib import LocalZooKeeper  # noqa: E402

quiet = logging.getLogger("bench-quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/cluster-impl.json"))
    ap.add_argument("--messages", type=int, default=100_000)
    args = ap.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        zk = LocalZooKeeper(root).start()
        brokers = [BrokerProc(root / f"b{i}", overrides=[f"broker.id={i}", f"zookeeper.connect={zk.connect}",
                                                          "default.replication.factor=3", "min.insync.replicas=2"])
                   for i in (1, 2, 3)]
        try:
            for b in brokers:
                b.start()
            boot = ",".join(b.bootstrap for b in brokers)
            admin = AdminClient({"bootstrap.servers": boot, "logger": quiet})
            while len(admin.list_topics(timeout=10).brokers) < 3:
                time.sleep(0.2)
            for f in admin.create_topics([NewTopic("bench", 1, 3)]).values():
                f.result(15)
            while not admin.list_topics("bench", timeout=10).topics["bench"].partitions:
                time.sleep(0.2)
            p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, "batch.num.messages": 10000,
                          "queue.buffering.max.messages": 500000, "logger": quiet})
            ok: list[int] = []
            failed: list[str] = []

            def report(err: object, _msg: object) -> None:
                (failed.append(str(err)) if err else ok.append(1))

            t = time.perf_counter()
            for _ in range(args.messages):
                while True:
                    try:
                        p.produce("bench", b"x" * 100, partition=0, on_delivery=report)
                        break
                    except BufferError:
                        p.poll(0.01)
                p.poll(0)
            p.flush(120)
            dt = time.perf_counter() - t
            if failed or len(ok) != args.messages:
                raise SystemExit(f"only {len(ok)} of {args.messages} acknowledged; first error: {failed[:1]}")
            res["acks_all_rf3_msgs_per_s"] = args.messages / dt
            res["acks_all_rf3_mb_per_s"] = args.messages * 100 / dt / 1e6
            leader = admin.list_topics("bench", timeout=10).topics["bench"].partitions[0].leader
            t = time.perf_counter()
            brokers[leader - 1].kill()
            acked: list[int] = []
            q = Producer({"bootstrap.servers": boot, "acks": "all", "message.timeout.ms": 60000, "logger": quiet})
            while not acked and time.perf_counter() - t < 60:
                q.produce("bench", b"after", partition=0, on_delivery=lambda e, m: acked.append(1) if e is None else None)
                q.flush(1)
            res["failover_leader_sigkill_to_first_ack_s"] = time.perf_counter() - t
            res["zookeeper_session_timeout_s"] = 6.0
        finally:
            for b in brokers:
                b.kill()
            zk.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({k: round(v, 2) for k, v in res.items()}, indent=2))
    for k, v in res.items():
        print(f"{k:40s} {v:10.2f}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
