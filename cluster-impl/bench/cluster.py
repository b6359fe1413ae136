"""`make bench-cluster-impl`: four brokers and a ZooKeeper on loopback, one partition with
replication factor 3 (min.insync.replicas=2, 100-byte values, confluent-kafka). Writes JSON to --out.

Measures, in this order, on the same partition:
- acks=all produce throughput;
- reassignment: moving the partition (its --messages records) onto the fourth broker, with the
  leader moving out, until ListPartitionReassignments is empty;
- failover: SIGKILL of the leader until the first acknowledged produce, with the default ZooKeeper
  session timeout (6 s) — the dead leader is noticed only when its session expires;
- preferred election: after the killed broker is back in the ISR, ElectLeaders until the preferred
  replica leads again;
- bounce: SIGKILL and immediate restart of the leader (well within the session timeout, so only the
  changed broker epoch tells the controller) until the first acknowledged produce.

Then, on fresh three-broker clusters (`replication.py`): acks=all latency p50/p99 with 1, 40 and 160
partitions, and ISR changes and shrinks per minute on the idle 160-partition cluster.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(HERE), str(HERE / "replication")]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import replication  # noqa: E402
from brokerlib import BrokerProc  # noqa: E402
from zklib import LocalZooKeeper  # noqa: E402

quiet = logging.getLogger("bench-quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
TOPIC = "bench"


def wait(pred: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.perf_counter() + timeout
    while not pred():
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Bench:
    def __init__(self, brokers: list[BrokerProc]) -> None:
        from confluent_kafka.admin import AdminClient

        self.brokers = brokers
        self.boot = ",".join(b.bootstrap for b in brokers)
        self.admin = AdminClient({"bootstrap.servers": self.boot, "logger": quiet})

    def meta(self) -> Any:
        return self.admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.get(0)

    def throughput(self, messages: int) -> dict[str, float]:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.boot, "acks": "all", "linger.ms": 5, "batch.num.messages": 10000,
                      "queue.buffering.max.messages": 500000, "logger": quiet})
        ok: list[int] = []
        failed: list[str] = []

        def report(err: object, _msg: object) -> None:
            (failed.append(str(err)) if err else ok.append(1))

        t = time.perf_counter()
        for _ in range(messages):
            while True:
                try:
                    p.produce(TOPIC, b"x" * 100, partition=0, on_delivery=report)
                    break
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
        p.flush(120)
        dt = time.perf_counter() - t
        if failed or len(ok) != messages:
            raise SystemExit(f"only {len(ok)} of {messages} acknowledged; first error: {failed[:1]}")
        return {"acks_all_rf3_msgs_per_s": messages / dt, "acks_all_rf3_mb_per_s": messages * 100 / dt / 1e6}

    def first_ack_after(self, t0: float) -> float:
        from confluent_kafka import Producer

        acked: list[int] = []
        q = Producer({"bootstrap.servers": self.boot, "acks": "all", "message.timeout.ms": 60000, "logger": quiet})
        while not acked and time.perf_counter() - t0 < 60:
            q.produce(TOPIC, b"after", partition=0, on_delivery=lambda e, m: acked.append(1) if e is None else None)
            q.flush(1)
        return time.perf_counter() - t0

    def reassign(self, messages: int) -> dict[str, float]:
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        md = self.meta()
        spare = next(b for b in range(1, len(self.brokers) + 1) if b not in md.replicas)
        target = [spare, *(r for r in md.replicas if r != md.leader)]
        ka = KafkaAdminClient(bootstrap_servers=self.boot.split(","))
        try:
            t = time.perf_counter()
            got = ka.alter_partition_reassignments({TopicPartition(TOPIC, 0): target})
            if any(e is not None for e in got.values()):
                raise SystemExit(f"reassignment refused: {got}")
            wait(lambda: not ka.list_partition_reassignments(), 120, "the reassignment")
            dt = time.perf_counter() - t
        finally:
            ka.close()
        return {"reassign_partition_s": dt, "reassign_partition_mb": messages * 100 / 1e6}

    def failover_and_preferred_election(self) -> dict[str, float]:
        from confluent_kafka import ElectionType, TopicPartition

        md = self.meta()
        leader, preferred = md.leader, md.replicas[0]
        t = time.perf_counter()
        self.brokers[leader - 1].kill()
        out = {"failover_leader_sigkill_to_first_ack_s": self.first_ack_after(t), "zookeeper_session_timeout_s": 6.0}
        self.brokers[leader - 1].start()
        wait(lambda: len(self.meta().isrs) == 3, 60, "the killed broker back in the ISR")
        if self.meta().leader == preferred:
            raise SystemExit("the preferred replica already leads; nothing to elect")
        t = time.perf_counter()
        self.admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(30)
        wait(lambda: self.meta().leader == preferred, 30, "the preferred replica to lead")
        out["preferred_election_s"] = time.perf_counter() - t
        return out

    def bounce(self) -> dict[str, float]:
        leader = self.meta().leader
        t = time.perf_counter()
        self.brokers[leader - 1].kill()
        self.brokers[leader - 1].start()
        return {"bounce_leader_to_first_ack_s": self.first_ack_after(t)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/cluster-impl.json"))
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--latency-partitions", type=int, nargs="*", default=[1, 40, 160])
    ap.add_argument("--latency-messages", type=int, default=500)
    ap.add_argument("--idle", type=float, default=60.0, help="idle seconds for the ISR stability row")
    args = ap.parse_args()
    from confluent_kafka.admin import NewTopic

    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        zk = LocalZooKeeper(root).start()
        brokers = [BrokerProc(root / f"b{i}", overrides=[f"broker.id={i}", f"zookeeper.connect={zk.connect}",
                                                          "default.replication.factor=3", "min.insync.replicas=2"])
                   for i in (1, 2, 3, 4)]
        try:
            for b in brokers:
                b.start()
            bench = Bench(brokers)
            wait(lambda: len(bench.admin.list_topics(timeout=10).brokers) == len(brokers), 30, "brokers")
            for f in bench.admin.create_topics([NewTopic(TOPIC, 1, 3)]).values():
                f.result(15)
            wait(lambda: bench.meta() is not None and len(bench.meta().isrs) == 3, 30, "a full ISR")
            res.update(bench.throughput(args.messages))
            res.update(bench.reassign(args.messages))
            res.update(bench.failover_and_preferred_election())
            res.update(bench.bounce())
        finally:
            for b in brokers:
                b.kill()
            zk.stop()
    if args.latency_partitions:
        res.update(replication.run(args.latency_partitions, args.latency_messages, args.idle))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({k: round(v, 2) for k, v in res.items()}, indent=2))
    for k, v in res.items():
        print(f"{k:40s} {v:10.2f}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
