"""The replica fetcher at scale: three broker processes, a real ZooKeeper, 120 partitions.

Before one fetcher per leader (with fetch sessions), each follower long-polled one partition at a
time over one connection per leader, so 40 idle partitions were enough for followers to fall
10 s behind and the ISRs to flap with no traffic at all. Here replica.lag.time.max.ms is 3 s:
the ISR of an idle, healthy cluster must not change once in 30 s, and acks=all deliveries to
every partition must all complete, again without any ISR change. Every ISR change is a new
version of the partition's state znode, so the versions are the witness.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import make_cluster
from kazoo.client import KazooClient
from test_repl_failover import admin, quiet, wait_for
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper
TOPIC = "many"
PARTITIONS = 120


def state_versions(zk: LocalZooKeeper) -> dict[int, int]:
    client = KazooClient(hosts=zk.connect)
    client.start(timeout=10)
    try:
        return {p: client.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")[1].version
                for p in range(PARTITIONS)}
    finally:
        client.stop()
        client.close()


def test_idle_cluster_with_many_partitions_keeps_its_isr(tmp_path: Path, zookeeper: LocalZooKeeper) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    cluster = make_cluster(tmp_path, zookeeper)
    try:
        client = admin(cluster)
        wait_for(lambda: len(client.list_topics(timeout=10).brokers) == 3, what="all brokers registered")
        for f in client.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
            f.result(30)

        def full() -> bool:
            """Every broker's metadata shows every ISR full (each answers from its own cache, and a
            broker applies its UpdateMetadata after its LeaderAndIsr work)."""
            for b in cluster:
                md = admin([b]).list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
                if len(md) != PARTITIONS or not all(len(p.isrs) == 3 for p in md.values()):
                    return False
            return True

        wait_for(full, timeout=60, what="every ISR full")
        leaders = {p.leader for p in client.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.values()}
        assert leaders == {1, 2, 3}, "each broker leads some partitions and follows the others"
        before = state_versions(zookeeper)

        time.sleep(30)
        assert state_versions(zookeeper) == before, "an ISR changed on an idle, healthy cluster"
        assert full()

        p = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster), "acks": "all",
                      "linger.ms": 0, "message.timeout.ms": 30000, "logger": quiet})
        acked: list[int] = []
        errors: list[str] = []
        for i in range(PARTITIONS * 3):
            p.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS,
                      on_delivery=lambda e, m: errors.append(str(e)) if e else acked.append(m.partition()))
            p.poll(0)
        assert p.flush(60) == 0, "deliveries still outstanding"
        assert errors == [] and sorted(set(acked)) == list(range(PARTITIONS)) and len(acked) == PARTITIONS * 3
        assert state_versions(zookeeper) == before, "an ISR changed under acks=all load"
        for b in cluster:
            assert "Traceback" not in b.log_text(), b.log_text()[-3000:]
    finally:
        for b in cluster:
            b.kill()
