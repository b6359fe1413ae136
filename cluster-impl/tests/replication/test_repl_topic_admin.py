"""Topic admin in a cluster: configs in ZooKeeper (Kafka's /config/topics), seen by every broker;
changes through any broker (kafka-python sends them to any); manual assignments; deletion that
removes every replica's log and lets the name be used again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import make_cluster
from kazoo.client import KazooClient
from test_repl_failover import admin, partition_md, wait_for
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper


def describe_on(b, topic: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    from test_repl_failover import quiet

    a = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})  # this broker only
    res = a.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    return {k: e.value for k, e in next(iter(res.values())).result(15).items()}


def test_configs_assignment_and_deletion_across_the_cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> None:
    from confluent_kafka.admin import NewTopic
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    cluster = make_cluster(tmp_path, zookeeper)
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=10)
    try:
        client = admin(cluster)
        wait_for(lambda: len(client.list_topics(timeout=10).brokers) == 3, what="all brokers registered")
        placed = NewTopic("conf", 2, -1, replica_assignment=[[3, 1], [3, 2]],
                          config={"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
        for f in client.create_topics([placed]).values():
            f.result(15)
        def in_sync(p: int, n: int) -> bool:
            md = partition_md(cluster, "conf", p)
            return md is not None and len(md.isrs) == n

        wait_for(lambda: in_sync(0, 2) and in_sync(1, 2), what="the placed partitions in sync")
        assert [partition_md(cluster, "conf", p).replicas for p in (0, 1)] == [[3, 1], [3, 2]]
        stored = json.loads(zk.get("/config/topics/conf")[0])
        assert stored["config"] == {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
        for b in cluster:
            wait_for(lambda b=b: describe_on(b, "conf").get("min.insync.replicas") == "2",
                     what=f"broker {b.bootstrap} to know the override")

        ka = KafkaAdminClient(bootstrap_servers=[b.bootstrap for b in cluster])
        try:
            ka.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "conf", configs={"min.insync.replicas": "1"})])
        finally:
            ka.close()
        for b in cluster:
            wait_for(lambda b=b: describe_on(b, "conf").get("min.insync.replicas") == "1",
                     what=f"broker {b.bootstrap} to see the change")
        assert json.loads(zk.get("/config/topics/conf")[0])["config"] == {
            "min.insync.replicas": "1", "unclean.leader.election.enable": "true"}, "an incremental SET keeps the rest"

        for f in client.delete_topics(["conf"]).values():
            f.result(15)
        wait_for(lambda: "conf" not in client.list_topics(timeout=10).topics, what="the topic gone from metadata")
        wait_for(lambda: not any((b.data / f"conf-{p}").exists() for b in cluster for p in (0, 1)),
                 what="every replica's log deleted")
        assert zk.exists("/brokers/topics/conf") is None and zk.exists("/config/topics/conf") is None
        for f in client.create_topics([NewTopic("conf", 1, 3)]).values():
            f.result(15)
        wait_for(lambda: in_sync(0, 3), what="the new topic in sync")
        time.sleep(0.5)
        assert describe_on(cluster[0], "conf")["min.insync.replicas"] == "2", "the broker default, not the old override"
    finally:
        zk.stop()
        for b in cluster:
            b.kill()
