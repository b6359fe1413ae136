"""Operator requests on a real ZooKeeper and real broker processes: partition add (seed 003 H),
preferred leader election, automatic leader rebalance, and replica reassignment (F) — under acks=all
load, across a controller failover, and with the moved-away replica deleted or set aside.

Requests go through real admin clients (confluent-kafka's for CreatePartitions and ElectLeaders,
kafka-python's for Alter/ListPartitionReassignments, which librdkafka lacks) and through the
seed's ZooKeeper admin paths with kazoo.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from brokerlib import BrokerProc
from conftest import make_cluster
from kazoo.client import KazooClient
from logbroker.dump import dump_partition
from test_repl_failover import (
    _controller,
    admin,
    create,
    partition_md,
    partition_meta,
    produce,
    quiet,
    wait_for,
)

pytestmark = pytest.mark.zookeeper


@contextmanager
def zk_client(connect: str) -> Iterator[KazooClient]:
    zk = KazooClient(hosts=connect)
    zk.start(10)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def kafka_python_admin(cluster: list[BrokerProc]) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=[b.bootstrap for b in cluster if b.alive()], request_timeout_ms=30000)


def reassigning(cluster: list[BrokerProc]) -> dict[Any, Any] | None:
    """The ongoing moves, or None when the client could not ask (the controller is moving, a broker
    is gone): callers poll, and a client error must not end the wait early."""
    from kafka.errors import KafkaError

    try:
        ka = kafka_python_admin(cluster)
    except KafkaError:
        return None
    try:
        return dict(ka.list_partition_reassignments())
    except KafkaError:
        return None
    finally:
        ka.close()


def reassign(cluster: list[BrokerProc], topic: str, target: list[int] | None) -> Any:
    from kafka import TopicPartition

    ka = kafka_python_admin(cluster)
    try:
        return ka.alter_partition_reassignments({TopicPartition(topic, 0): target})
    finally:
        ka.close()


def topic_znode(zk: KazooClient, topic: str) -> dict[str, Any]:
    return json.loads(zk.get(f"/brokers/topics/{topic}")[0])


class BackgroundProducer:
    """acks=all sends of increasing values from a thread, until stopped; records what was acked."""

    def __init__(self, cluster: list[BrokerProc], topic: str, start: int) -> None:
        from confluent_kafka import Producer

        self.acked: list[int] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._p = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster if b.alive()),
                            "acks": "all", "message.timeout.ms": 30000, "linger.ms": 5, "logger": quiet})
        self._next = start
        self._topic = topic
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err:
            self.errors.append(str(err))
        else:
            self.acked.append(int(msg.value()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._p.produce(self._topic, str(self._next).encode(), partition=0, on_delivery=self._on_delivery)
            self._next += 1
            self._p.poll(0.002)
        self._p.flush(40)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(60)


# --- partition add (H) -----------------------------------------------------------------------------
def test_partitions_added_through_the_api_and_through_the_seed_admin_path(cluster: list[BrokerProc],
                                                                          zookeeper: Any) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewPartitions

    create(cluster, "g")
    client = admin(cluster)
    for f in client.create_partitions([NewPartitions("g", 3)]).values():
        f.result(30)
    for p in (1, 2):
        wait_for(lambda p=p: (lambda m: m[0] >= 0 and len(m[1]) == 3)(partition_meta(cluster, "g", p)),
                 what=f"partition {p} with a leader and a full ISR")
    acked, errors = produce(cluster, "g", range(50), partition=2)
    assert errors == [] and len(acked) == 50, "a new partition takes acks=all writes"

    with pytest.raises(KafkaException) as shrink:
        for f in client.create_partitions([NewPartitions("g", 2)]).values():
            f.result(30)
    assert shrink.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    with zk_client(zookeeper.connect) as zk:  # the seed's way: an operator writes the request into ZooKeeper
        zk.create("/admin/partitions_add/g/3", json.dumps({"replicas": [2, 3, 1]}).encode(), makepath=True)
        wait_for(lambda: (lambda m: m is not None and m.leader == 2 and sorted(m.isrs) == [1, 2, 3])(
            partition_md(cluster, "g", 3)), what="partition 3 led by its first replica")
        wait_for(lambda: not zk.exists("/admin/partitions_add/g/3"), what="the controller to remove the request")
        assert topic_znode(zk, "g")["partitions"]["3"] == [2, 3, 1]
    for b in cluster:
        assert all((Path(b.data) / f"g-{p}").is_dir() for p in range(4))


# --- leader elections -----------------------------------------------------------------------------
def _preferred(cluster: list[BrokerProc], topic: str) -> int:
    md = partition_md(cluster, topic)
    assert md is not None
    return int(md.replicas[0])


def _fail_over_and_back(cluster: list[BrokerProc], broker: int, topics: list[str]) -> None:
    """Kill `broker`, wait until others lead `topics`, restart it and wait until it is in sync again."""
    cluster[broker - 1].kill()
    for t in topics:
        wait_for(lambda t=t: partition_meta(cluster, t)[0] not in (broker, -1), what=f"a new leader of {t}")
    cluster[broker - 1].start()
    for t in topics:
        wait_for(lambda t=t: broker in partition_meta(cluster, t)[1], timeout=40,
                 what=f"{broker} back in the ISR of {t}")


def test_preferred_leader_election_by_api_and_by_admin_path(cluster: list[BrokerProc], zookeeper: Any) -> None:
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    create(cluster, "pa")
    pref = _preferred(cluster, "pa")
    for name in (f"pb{i}" for i in range(12)):  # a second topic preferring the same broker
        create(cluster, name)
        if _preferred(cluster, name) == pref:
            break
    assert _preferred(cluster, name) == pref
    _fail_over_and_back(cluster, pref, ["pa", name])
    assert partition_meta(cluster, "pa")[0] != pref, "nothing moves leadership back on its own within 300 s"

    client = admin(cluster)
    tp = TopicPartition("pa", 0)
    got = client.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert got[tp] is None, f"election refused: {got[tp]}"
    wait_for(lambda: partition_meta(cluster, "pa")[0] == pref, what="the preferred replica to lead again")
    again = client.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert again[tp] is not None and again[tp].code() == KafkaError.ELECTION_NOT_NEEDED

    with zk_client(zookeeper.connect) as zk:
        zk.create("/admin/preferred_replica_election",
                  json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0}]}).encode(), makepath=True)
        wait_for(lambda: partition_meta(cluster, name)[0] == pref, what="the admin-path election")
        wait_for(lambda: not zk.exists("/admin/preferred_replica_election"), what="the request to be consumed")
    acked, errors = produce(cluster, "pa", range(20))
    assert errors == [] and len(acked) == 20


def test_auto_leader_rebalance_moves_leadership_back(tmp_path: Path, zookeeper: Any) -> None:
    brokers = make_cluster(tmp_path, zookeeper, extra=("leader.imbalance.check.interval.seconds=1",))
    try:
        create(brokers, "r")
        pref = _preferred(brokers, "r")
        _fail_over_and_back(brokers, pref, ["r"])
        wait_for(lambda: partition_meta(brokers, "r")[0] == pref, timeout=30,
                 what="the controller to notice the imbalance and elect the preferred replica")
    finally:
        for b in brokers:
            b.kill()


# --- reassignment (F) ------------------------------------------------------------------------------
def _all_acked_on(brokers: list[BrokerProc], replicas: list[int], topic: str, acked: set[int]) -> None:
    """Every acknowledged value is in every replica's log, and below the HW of the most advanced one;
    replicas agree below the smallest HW. (A follower's own HW trails the leader's by one fetch, so
    a value acknowledged just before shutdown may sit above a follower's HW: that is not a loss.)"""
    dumps = {r: dump_partition(Path(brokers[r - 1].data) / f"{topic}-0") for r in replicas}
    hws = {r: d[0]["hw"] for r, d in dumps.items()}
    logged = {r: [int(x["value"]) for x in d[1:]] for r, d in dumps.items()}
    for r, got in logged.items():
        missing = acked - set(got)
        assert not missing, f"replica on broker {r} lacks {len(missing)} acknowledged values: {sorted(missing)[:5]}"
    best = max(hws, key=lambda r: hws[r])
    assert not acked - set(logged[best][:hws[best]]), "acknowledged values above the high watermark"
    n = min(hws.values())
    assert len({tuple(v[:n]) for v in logged.values()}) == 1, "replicas agree below their HW"


def test_reassignment_under_acks_all_load_moves_leadership_and_deletes_the_old_replica(
        tmp_path: Path, zookeeper: Any) -> None:
    brokers = make_cluster(tmp_path, zookeeper, n=4)
    try:
        create(brokers, "m")
        md = partition_md(brokers, "m")
        old, leader = [int(r) for r in md.replicas], int(md.leader)
        new = next(b for b in (1, 2, 3, 4) if b not in old)
        target = [new, *(r for r in old if r != leader)]  # the leader itself moves out
        before, errors = produce(brokers, "m", range(3000))
        assert errors == [] and len(before) == 3000

        load = BackgroundProducer(brokers, "m", start=100_000)
        wait_for(lambda: len(load.acked) > 100, what="load before the move")
        got = reassign(brokers, "m", target)
        assert all(e is None for e in got.values()), got
        wait_for(lambda: reassigning(brokers) == {}, timeout=60, what="the reassignment to complete")
        wait_for(lambda: (lambda m: [int(r) for r in m.replicas] == target and sorted(m.isrs) == sorted(target)
                          and m.leader in target)(partition_md(brokers, "m")), what="metadata with the target set")
        during = len(load.acked)
        wait_for(lambda: len(load.acked) > during + 100, what="load after the move")
        load.stop()

        assert not (Path(brokers[leader - 1].data) / "m-0").exists(), "StopReplica deleted the old leader's replica"
        with zk_client(zookeeper.connect) as zk:
            z = topic_znode(zk, "m")
            assert z["partitions"]["0"] == target and not z["adding_replicas"] and not z["removing_replicas"]
            assert not zk.exists("/admin/partitions_reassigned/m/0")
        for b in brokers:
            b.stop()
        _all_acked_on(brokers, target, "m", set(before) | set(load.acked))
    finally:
        for b in brokers:
            b.kill()


def test_reassignment_resumes_after_controller_failover_and_a_stray_replica_is_set_aside(
        tmp_path: Path, zookeeper: Any) -> None:
    """The new replica is frozen, so the move cannot finish before the controller goes away; the next
    controller picks it up from ZooKeeper (seed 003 D.7). The removed replica's broker is down during
    the move; when it comes back, the complete LeaderAndIsr makes it set its old copy aside."""
    # a long session keeps the frozen broker registered; the controller is stopped cleanly, which
    # closes its session at once, so failover is still quick
    brokers = make_cluster(tmp_path, zookeeper, n=4, session_ms=20000)
    try:
        cid, _ = _controller(zookeeper.connect)
        for name in (f"f{i}" for i in range(12)):  # a partition whose spare broker is not the controller
            create(brokers, name)
            old = [int(r) for r in partition_md(brokers, name).replicas]
            spare = next(b for b in (1, 2, 3, 4) if b not in old)
            if spare != cid:
                break
        assert spare != cid and cid in old
        target = [spare, *(r for r in old if r != cid)]
        acked, errors = produce(brokers, name, range(500))
        assert errors == [] and len(acked) == 500

        os.kill(brokers[spare - 1].proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
        try:  # a Kafka client would hang on the frozen broker, so this request takes the seed's path
            with zk_client(zookeeper.connect) as zk:
                zk.create(f"/admin/partitions_reassigned/{name}/0", json.dumps({"replicas": target}).encode(),
                          makepath=True)
                wait_for(lambda: topic_znode(zk, name)["adding_replicas"] == {"0": [spare]}, what="the move to start")
                assert topic_znode(zk, name)["removing_replicas"] == {"0": [cid]}
            brokers[cid - 1].stop()
            wait_for(lambda: _controller(zookeeper.connect)[0] not in (None, cid), what="a new controller")
        finally:
            os.kill(brokers[spare - 1].proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
        wait_for(lambda: reassigning(brokers) == {}, timeout=90, what="the new controller to finish the move")
        wait_for(lambda: [int(r) for r in partition_md(brokers, name).replicas] == target, what="AR = target")
        with zk_client(zookeeper.connect) as zk:
            assert topic_znode(zk, name)["partitions"]["0"] == target
            assert not zk.exists(f"/admin/partitions_reassigned/{name}/0")

        data = Path(brokers[cid - 1].data)
        assert (data / f"{name}-0").is_dir(), "a dead broker's replica cannot be stopped yet"
        brokers[cid - 1].start()
        wait_for(lambda: not (data / f"{name}-0").exists(), what="the stray replica to be set aside")
        strays = [p.name for p in data.iterdir() if p.name.startswith(f"{name}-0.") and p.name.endswith(".stray")]
        assert len(strays) == 1, list(data.iterdir())
        more, errors = produce(brokers, name, range(500, 600))
        assert errors == [] and len(more) == 100
        for b in brokers:
            b.stop()
        _all_acked_on(brokers, target, name, set(acked) | set(more))
    finally:
        for b in brokers:
            b.kill()


def test_reassignment_requests_that_cannot_be_done_are_refused(cluster: list[BrokerProc]) -> None:
    from kafka import TopicPartition
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    create(cluster, "v")
    tp = TopicPartition("v", 0)
    assert reassign(cluster, "v", [1, 9])[tp] is InvalidReplicationAssignmentError, "broker 9 does not exist"
    assert reassign(cluster, "v", [1, 1])[tp] is InvalidReplicationAssignmentError
    assert reassign(cluster, "v", None)[tp] is NoReassignmentInProgressError
    assert reassigning(cluster) == {}
