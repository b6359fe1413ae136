"""Failover with a real ZooKeeper and three broker processes on loopback (seed 003 A, D, E)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from brokerlib import BrokerProc
from conftest import make_cluster
from kazoo.client import KazooClient
from logbroker.dump import dump_partition

pytestmark = pytest.mark.zookeeper
quiet = logging.getLogger("quiet-repl")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def admin(cluster: list[BrokerProc]):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in cluster), "logger": quiet})


def wait_for(pred, timeout: float = 30, what: str = "condition"):  # type: ignore[no-untyped-def]
    """`pred()`'s first truthy value; past the deadline, an AssertionError saying what it last returned."""
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last saw {got!r}")


def partition_meta(cluster: list[BrokerProc], topic: str, partition: int = 0):  # type: ignore[no-untyped-def]
    """(leader, sorted ISR) of one partition as a client sees it."""
    m = partition_md(cluster, topic, partition)
    return (m.leader, sorted(m.isrs)) if m is not None else (-1, [])


def partition_md(cluster: list[BrokerProc], topic: str, partition: int = 0):  # type: ignore[no-untyped-def]
    """confluent-kafka's PartitionMetadata (leader, replicas, isrs), or None while there is none."""
    client = admin([b for b in cluster if b.alive()])
    md = client.list_topics(topic, timeout=10)
    parts = md.topics[topic].partitions if topic in md.topics else {}
    return parts.get(partition)  # None: the controller has not elected a leader yet


def create(cluster: list[BrokerProc], topic: str) -> None:
    """A topic with one partition and three replicas, once all of them are in sync."""
    from confluent_kafka.admin import NewTopic

    client = admin(cluster)  # keep the client alive until its futures resolve
    wait_for(lambda: len(client.list_topics(timeout=10).brokers) == len(cluster), what="all brokers registered")
    for f in client.create_topics([NewTopic(topic, 1, 3)]).values():
        f.result(15)
    wait_for(lambda: len(partition_meta(cluster, topic)[1]) == 3, what="a full ISR")


def produce(cluster: list[BrokerProc], topic: str, values: range, partition: int = 0) -> tuple[list[int], list[str]]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster if b.alive()), "acks": "all",
                  "message.timeout.ms": 30000, "logger": quiet})
    acked: list[int] = []
    errors: list[str] = []
    for v in values:
        p.produce(topic, str(v).encode(), partition=partition,
                  on_delivery=lambda e, m: errors.append(str(e)) if e else acked.append(int(m.value())))
        p.poll(0)
    p.flush(40)
    return acked, errors


def values_in_log(b: BrokerProc, topic: str, partition: int = 0) -> list[int]:
    """Every value in the replica's log, committed or not (a follower's HW trails the leader's)."""
    return [int(r["value"]) for r in dump_partition(Path(b.data) / f"{topic}-{partition}")[1:]]


def committed_values(b: BrokerProc, topic: str, partition: int = 0) -> list[int]:
    dump = dump_partition(Path(b.data) / f"{topic}-{partition}")
    hw = dump[0]["hw"]
    return [int(r["value"]) for r in dump[1:] if r["offset"] < hw]


def test_leader_sigkill_new_leader_from_isr_and_every_acked_message_survives(cluster: list[BrokerProc]) -> None:
    create(cluster, "t")
    acked, errors = produce(cluster, "t", range(0, 300))
    assert errors == [] and len(acked) == 300
    leader, _ = partition_meta(cluster, "t")
    cluster[leader - 1].kill()
    new_leader, isr = wait_for(lambda: (lambda m: m if m[0] not in (leader, -1) else None)(
                                   partition_meta(cluster, "t")),
                               what="a new leader")
    assert new_leader in (1, 2, 3) and new_leader != leader and leader not in isr
    more, errors = produce(cluster, "t", range(300, 400))
    assert errors == [] and len(more) == 100, "with 2 of 3 replicas the partition still takes acks=all writes"
    cluster[leader - 1].start()  # the old leader comes back: it truncates, follows, and rejoins the ISR
    wait_for(lambda: partition_meta(cluster, "t")[1] == [1, 2, 3], timeout=40, what="the old leader to rejoin the ISR")
    for b in cluster:
        b.stop()
    for b in cluster:
        got = committed_values(b, "t")
        missing = set(acked + more) - set(got)
        assert not missing, f"broker on {b.port} lost {len(missing)} acknowledged values"
    logs = [committed_values(b, "t") for b in cluster]
    n = min(len(x) for x in logs)
    assert logs[0][:n] == logs[1][:n] == logs[2][:n], "replicas agree below their HW"


def _controller(zk_connect: str) -> tuple[int | None, int]:
    """(controller id or None while there is none, controller epoch)."""
    from kazoo.exceptions import NoNodeError

    zk = KazooClient(hosts=zk_connect)
    zk.start(10)
    try:
        try:  # /controller first: its epoch was written with it, so the epoch read after is as new
            cid = json.loads(zk.get("/controller")[0])["brokerid"]
        except NoNodeError:
            cid = None
        epoch = int(zk.get("/controller_epoch")[0])
        return cid, epoch
    finally:
        zk.stop()
        zk.close()


def test_controller_sigkill_elects_a_higher_epoch_and_leaders_stay(cluster: list[BrokerProc], zookeeper) -> None:  # type: ignore[no-untyped-def]
    create(cluster, "c")
    cid, epoch = _controller(zookeeper.connect)
    leader_before, _ = partition_meta(cluster, "c")
    cluster[cid - 1].kill()
    new_cid, new_epoch = wait_for(
        lambda: (lambda c: c if c[0] not in (cid, None) else None)(_controller(zookeeper.connect)),
        what="a new controller")
    assert new_epoch > epoch and new_cid != cid
    if leader_before != cid:  # a partition led by a surviving broker keeps its leader
        wait_for(lambda: partition_meta(cluster, "c")[1] == sorted({1, 2, 3} - {cid}),
                 what="ISR without the dead broker")
        assert partition_meta(cluster, "c")[0] == leader_before
    acked, errors = produce(cluster, "c", range(50))
    assert errors == [] and len(acked) == 50


def test_leader_killed_and_restarted_within_the_session_timeout_is_noticed(cluster: list[BrokerProc]) -> None:
    """A bounce faster than zookeeper.session.timeout.ms: the new registration replaces the old one
    before the controller looks, so only the changed broker epoch (czxid) tells. The partition must
    get a working leader again, and the bounced broker must rejoin the ISR."""
    create(cluster, "q")
    acked, errors = produce(cluster, "q", range(100))
    assert errors == [] and len(acked) == 100
    leader, _ = partition_meta(cluster, "q")
    cluster[leader - 1].kill()
    cluster[leader - 1].start()  # well within the 3 s session
    more, errors = produce(cluster, "q", range(100, 200))
    assert errors == [] and len(more) == 100, "the partition is writable again"
    wait_for(lambda: partition_meta(cluster, "q")[1] == [1, 2, 3], timeout=40,
             what="the bounced broker back in the ISR")
    for b in cluster:
        b.stop()
    for b in cluster:
        missing = set(acked + more) - set(values_in_log(b, "q"))
        assert not missing, f"broker on {b.port} lacks {len(missing)} acknowledged values"



def test_controller_restarted_within_its_session_elects_a_new_epoch_at_once(tmp_path: Path,
                                                                          zookeeper) -> None:  # type: ignore[no-untyped-def]
    """The restarted controller finds /controller naming itself, held by its dead process's session
    (10 s here). It removes that znode instead of taking it for a win (controlling with the dead
    process's epoch), so a controller with a higher epoch is elected long before that session expires."""
    cluster = make_cluster(tmp_path, zookeeper, session_ms=10_000)
    try:
        create(cluster, "r")
        cid, epoch = _controller(zookeeper.connect)
        assert cid is not None
        cluster[cid - 1].kill()
        t0 = time.monotonic()
        cluster[cid - 1].start()
        wait_for(lambda: _controller(zookeeper.connect)[1] > epoch, timeout=30, what="a controller with a new epoch")
        assert time.monotonic() - t0 < 8.0, "the new epoch waited for the dead session to expire"
        acked, errors = produce(cluster, "r", range(50))
        assert errors == [] and len(acked) == 50
    finally:
        for b in cluster:
            b.kill()
