"""The two disk fault families on real containers: lazyfs under the broker's data directory forgets
exactly what was not fsynced, `lose-unfsynced` and `disk-loss` act through it and the cluster comes
back whole, and a broker that lost its disk says so and is handled once (KIP-966).

One deployment (3 nodes, ZooKeeper, brokers with Kafka's default flush — no fsync of their own — so
a crash has something to lose; a 3-partition RF 3 topic) serves the module. The same families on the
simulator: `test_disk_families_sim.py`."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from harness.phases import wait_recovered
from harness.systems.logbroker import layout as bl
from harness.systems.logbroker import zk_layout as zkp
from harness.systems.logbroker.db import LogbrokerDB
from kernel.db import Cluster
from kernel.nemesis import NemesisContext, PlannedFault, Target
from nemesis.registry import FAMILIES

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _produce(db: LogbrokerDB, n: int = 300) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": db.bootstrap_servers(), "acks": "all", "linger.ms": 0})
    for i in range(n):
        p.produce("chaos", str(i).encode(), partition=i % 3)
    assert p.flush(30) == 0


def _play(name: str, kind: str, victim: Target, db: LogbrokerDB, cluster: Cluster, **params: Any
          ) -> tuple[list[tuple[str, dict[str, Any], object]], dict[str, Any], dict[str, Any]]:
    assert wait_recovered(db, "chaos", 3, 3, 60), "the cluster is whole before the fault"
    fam = FAMILIES[name]()
    fault = PlannedFault(7, name, kind, 0.0, 1.0, {"victim": victim}, {"key": 0, **params})
    ops: list[tuple[str, dict[str, Any], object]] = []
    ctx = NemesisContext(cluster, db, "chaos", 3, 1, record=lambda f, v, fid: ops.append((f, v, fid)))
    out: dict[str, Any] = {"kind": kind, "steps": {}}
    try:
        started = asyncio.run(fam.start(ctx, fault, out))
        stopped = asyncio.run(fam.stop(ctx, fault, started))
    finally:
        fam.heal(ctx)
    assert wait_recovered(db, "chaos", 3, 3, 60), f"{name}: the cluster is whole again after the heal"
    return ops, started, stopped


def test_lazyfs_forgets_what_was_not_fsynced(deployed: tuple[LogbrokerDB, Cluster]) -> None:
    db, cluster = deployed
    r = cluster.remotes["n3"]
    assert r.exec(f"mountpoint -q {bl.BROKER_DATA} && echo mounted").stdout.strip() == "mounted"
    f = f"{bl.BROKER_DATA}/probe.txt"
    r.exec(f"python3 -c \"import os; fd=os.open('{f}', os.O_CREAT|os.O_WRONLY, 0o644); os.write(fd, b'synced;'); "
           f"os.fsync(fd); os.write(fd, b'unsynced'); os.close(fd)\"")
    assert r.exec(f"cat {f}").stdout == "synced;unsynced"
    try:
        lost = db.crash(cluster.node("n3"), lose_unfsynced=True)
        assert lost.get("probe.txt") == len("unsynced"), lost
        assert r.exec(f"cat {f}").stdout == "synced;"
        assert db.broker_pid(cluster.node("n3")) is None
    finally:
        r.exec(f"rm -f {f}")
        db.start(cluster.node("n3"))


def test_lose_unfsynced_crashes_a_leader_that_comes_back_with_less(deployed: tuple[LogbrokerDB, Cluster]) -> None:
    db, cluster = deployed
    _produce(db)
    ops, started, stopped = _play("lose-unfsynced", "leader", Target.leader(0, "n1"), db, cluster)
    victim = started["nodes"][0]
    assert started["targets"]["victim"]["how"] == "metadata" and victim == started["targets"]["victim"]["node"]
    assert sum(started["lost"].values()) > 0, started  # its unsynced tail of chaos-0 (at least) was gone
    assert stopped["restarted"] == [victim] and db.broker_pid(cluster.node(victim)) is not None


def test_disk_loss_brings_the_broker_back_empty_and_it_is_handled_once(deployed: tuple[LogbrokerDB, Cluster]
                                                                       ) -> None:
    db, cluster = deployed
    _produce(db)
    ops, started, stopped = _play("disk-loss", "one", Target.of_node("n2"), db, cluster)
    assert started["wiped"] == "n2" and [f for f, _, _ in ops] == ["start-kill", "stop-kill"]
    r = cluster.remotes["n2"]
    log = r.exec(f"cat {bl.BROKER_LOG}").stdout
    assert "registering as a broker without its data" in log
    assert "broker.id=2" in r.exec(f"cat {bl.BROKER_DATA}/meta.properties").stdout  # claimed anew
    zk = db._client()
    data, stat = zk.get(f"{zkp.BROKER_IDS}/2")
    incarnation = json.loads(data).get("lost_data")
    assert incarnation and incarnation.startswith("2@")  # this process of broker 2 started without its data
    handled, _ = zk.get(f"{zkp.LOST_DATA_HANDLED}/2")
    assert handled.decode() == incarnation  # the controller took it out of every ISR, once for this process
    deadline = time.monotonic() + 30  # and it caught up: it holds what its peers hold
    while time.monotonic() < deadline and not db.recovered("chaos", 3, 3):
        time.sleep(0.5)
    dumps = db.dump_replicas(cluster.node("n2"))
    assert any(len(data.splitlines()) > 1 for data in dumps.values()), "n2 fetched the records back"
