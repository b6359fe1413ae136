"""The DB on real containers: a ZooKeeper ensemble and three brokers deployed over SSH, driven by
pid files, observed through ZooKeeper and a real Kafka client."""

from __future__ import annotations

import json
import logging
import time

import pytest

from harness.systems.logbroker.db import LogbrokerDB
from harness.systems.logbroker.settings import BrokerSettings
from kernel.db import Cluster

pytestmark = pytest.mark.docker
quiet = logging.getLogger("quiet-db")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def test_deploy_produce_pause_kill_restart_dump_teardown(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    nodes = docker_cluster.nodes
    db = LogbrokerDB(BrokerSettings(partitions=2)).attach(Cluster(nodes, {n.name: docker_cluster.remote(n.name)
                                                                          for n in nodes}))
    try:
        db.setup_all()
        assert db.controller() in nodes and (db.controller_epoch() or 0) >= 1
        admin = AdminClient({"bootstrap.servers": db.bootstrap_servers(), "logger": quiet})
        for f in admin.create_topics([NewTopic("chaos", 2, 3)]).values():
            f.result(15)
        deadline = time.monotonic() + 20
        while db.leader("chaos", 1) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        leader = db.leader("chaos", 0)
        assert leader in nodes
        p = Producer({"bootstrap.servers": db.bootstrap_servers(), "acks": "all", "logger": quiet})
        errors: list[object] = []
        for i in range(50):
            p.produce("chaos", str(i).encode(), partition=i % 2,
                      on_delivery=lambda e, m: errors.append(e) if e else None)
        assert p.flush(20) == 0 and errors == []

        n3 = nodes[2]
        pid = db.broker_pid(n3)
        assert pid is not None
        db.pause(n3)
        assert docker_cluster.remote("n3").exec(f"ps -o stat= -p {pid}").stdout.strip().startswith("T")
        db.resume(n3)
        db.kill(n3)
        assert db.broker_pid(n3) is None
        db.start(n3)
        assert db.broker_pid(n3) not in (None, pid)

        dumps = db.dump_replicas(nodes[0])
        assert set(dumps) == {"chaos-0.jsonl", "chaos-1.jsonl", "probes.json"}
        probes = json.loads(dumps["probes.json"])  # the coverage probes its broker process wrote on the node
        assert probes["processes"] >= 1 and len(probes["probes"]) >= 40
        assert all(name in probes["probes"] and n > 0 for name, n in probes["counts"].items())
        lines = [json.loads(x) for x in dumps["chaos-0.jsonl"].decode().splitlines()]
        assert "hw" in lines[0] and lines[0]["leo"] == 25
        assert [int(r["value"]) for r in lines[1:]] == list(range(0, 50, 2))
    finally:
        db.teardown_all()
    assert all(db.broker_pid(n) is None and db.zookeeper_pid(n) is None for n in nodes)
