"""The production brokers on the simulator: failover, pauses past the session, and the disk model."""

from __future__ import annotations

import os
import random

from logbroker.coord import paths
from logbroker.core.partition import TopicPartition
from logsim.client import SimKafkaClient
from logsim.cluster import SimCluster


def _cluster(seed: int, **settings: str) -> SimCluster:
    c = SimCluster(seed, 3, settings={"min.insync.replicas": "2", **settings})
    c.__enter__()
    c.start()
    c.run_for(5)
    c.create_topic("t", 2, 3)
    c.run_for(3)
    assert c.recovered("t", 2, 3)
    return c


def _send(c: SimCluster, values: list[int], key: int = 0) -> list[tuple[str, object, str | None]]:
    k = SimKafkaClient(c.net, c.names, "n1", "t", c.rng("client"))
    return c.loop.run_until_complete(k.send_many([(key, v) for v in values]))


def test_killing_the_leader_elects_another_and_acknowledged_writes_survive() -> None:
    c = _cluster(1)
    try:
        assert [r[0] for r in _send(c, [1, 2, 3])] == ["ok", "ok", "ok"]
        old = c.leader("t", 0)
        assert old is not None
        c.nodes[old].kill()
        c.run_for(10)
        new = c.leader("t", 0)
        assert new is not None and new != old
        got = _send(c, [4])
        assert got[0][0] == "ok" and got[0][1] == 3
        c.nodes[old].start()
        c.run_for(15)
        assert c.recovered("t", 2, 3)
        k = SimKafkaClient(c.net, c.names, "n2", "t", c.rng("reader"))
        k.assign([0])
        assert c.loop.run_until_complete(k.poll(2.0)) == {"0": [[0, 1], [1, 2], [2, 3], [3, 4]]}
    finally:
        c.close()


def test_a_broker_paused_past_its_session_loses_leadership_and_comes_back_as_follower() -> None:
    c = _cluster(2)
    try:
        victim = c.leader("t", 0)
        assert victim is not None
        c.nodes[victim].pause()
        c.run_for(10)
        assert c.leader("t", 0) not in (None, victim)
        assert c.controller() != victim
        c.nodes[victim].resume()
        c.run_for(20)
        assert c.recovered("t", 2, 3)
        core = c.nodes[victim].core
        assert core is not None and not core.partitions[TopicPartition("t", 0)].is_leader()
    finally:
        c.close()


def _segment_size(c: SimCluster, node: str) -> int:
    return os.path.getsize(c.data_root / node / "t-0" / f"{0:020d}.log")


def test_a_kill_keeps_unflushed_writes_and_a_power_loss_does_not() -> None:
    c = _cluster(3)  # Kafka's default: no fsync per message
    try:
        assert [r[0] for r in _send(c, list(range(10)))] == ["ok"] * 10
        follower = next(n for n in c.names if n != c.leader("t", 0))
        before = _segment_size(c, follower)
        assert before > 0
        c.nodes[follower].kill()
        assert _segment_size(c, follower) == before  # the page cache survives a SIGKILL
        c.nodes[follower].start()
        c.run_for(10)
        keep_durable_only = random.Random(1)  # its first draw (0.13 < 0.5) keeps only the fsynced part
        c.nodes[follower].kill(power_loss=True, rng=keep_durable_only)
        assert _segment_size(c, follower) == 0  # the restarted process never fsynced, nor did the first
    finally:
        c.close()


def test_with_fsync_per_message_a_power_loss_keeps_everything() -> None:
    c = _cluster(4, **{"flush.messages": "1"})
    try:
        assert [r[0] for r in _send(c, list(range(10)))] == ["ok"] * 10
        c.run_for(1)
        follower = next(n for n in c.names if n != c.leader("t", 0))
        before = _segment_size(c, follower)
        c.power_loss(follower)
        assert _segment_size(c, follower) == before
    finally:
        c.close()


def _acting_controllers(c: SimCluster) -> dict[str, int]:
    """Node -> the controller epoch of every running broker whose controller is active."""
    out = {}
    for name, node in c.nodes.items():
        mgr = getattr(node.core, "replication", None) if node.running else None
        state = mgr.controller.state if mgr is not None else None
        if state is not None:
            out[name] = state.epoch
    return out


def test_a_controller_restarted_within_its_session_does_not_act_on_its_dead_session_znode() -> None:
    """/controller is ephemeral: a controller killed and restarted before its session expires finds
    its own broker id there, but the znode belongs to its dead session. The new process must not take
    that for a win (it would control with the dead process's epoch until the session expires); it
    removes the leftover, and the brokers elect a controller with a new epoch at once."""
    c = _cluster(3)
    try:
        victim = c.controller()
        assert victim is not None
        epoch = int(c.zk.nodes[paths.CONTROLLER_EPOCH].data)
        c.nodes[victim].kill()
        c.run_for(0.5)
        c.nodes[victim].start()
        c.run_for(2.0)  # well inside the 6 s session of the dead process
        acting = _acting_controllers(c)
        now = int(c.zk.nodes[paths.CONTROLLER_EPOCH].data)
        assert now > epoch, f"no new election: epoch {now}, acting {acting}"
        assert list(acting.values()) == [now], f"acting controllers {acting} at ZooKeeper epoch {now}"
        c.run_for(10)
        assert c.recovered("t", 2, 3)
    finally:
        c.close()
