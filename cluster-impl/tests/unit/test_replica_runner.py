"""The replica manager and controller run against any `ClusterStore` they are handed: here an
in-memory one, with `offload.inline` (no ZooKeeper, no worker threads, no sockets — a one-broker
cluster talks to itself without one)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from logbroker.config import DEFAULTS, from_mapping
from logbroker.coord.model import PartitionState
from logbroker.core.broker import BrokerCore
from logbroker.core.clock import ManualClock
from logbroker.core.partition import Role, TopicPartition
from logbroker.offload import Offload, inline
from logbroker.protocol.errors import Err
from logbroker.replication.manager import ReplicaManager
from memstore import MemoryStore


def _core(tmp_path: Path) -> BrokerCore:
    cfg = from_mapping({**DEFAULTS, "broker.id": "1", "log.dirs": str(tmp_path), "zookeeper.connect": "memory",
                        "listeners": "PLAINTEXT://127.0.0.1:9092", "auto.leader.rebalance.enable": "false"})
    core = BrokerCore(cfg, ManualClock(1_000))
    core.load_partitions()
    return core


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_one_broker_cluster_on_a_memory_store(tmp_path: Path) -> None:
    store = MemoryStore()
    threads: list[str] = []

    async def watched_inline(fn: Callable[..., Any], *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return await inline(fn, *args)

    offload: Offload = watched_inline

    async def run() -> None:
        core = _core(tmp_path)
        rm = ReplicaManager(core, store, offload)
        core.replication = rm
        await rm.start_async()
        assert store.controller_id == 1 and store.controller_epoch == 1 and 1 in store.brokers
        assert rm.controller.active
        assert rm.create_topic("t", 2, 1, {}) is Err.NONE
        tp = TopicPartition("t", 0)
        await _until(lambda: tp in core.partitions and core.partitions[tp].role is Role.LEADER)
        p = core.partitions[tp]
        assert (p.leader_epoch, p.isr) == (0, [1])
        assert store.states[("t", 0)] == (PartitionState(1, 0, (1,), 1), 0)
        # the decision core saw the controller's epoch and the znode version
        assert rm.state.controller_epoch == 1 and rm.state.zk_versions[tp] == 0
        # a stale controller (epoch 0) is refused, and nothing changes
        reply = await rm.handle_internal({"type": "leader_and_isr", "controller_id": 9, "controller_epoch": 0,
                                          "partitions": [{"topic": "t", "partition": 0, "leader": 9,
                                                          "leader_epoch": 5, "isr": [9], "replicas": [9],
                                                          "zk_version": 3}]})
        assert reply == {"error": int(Err.STALE_CONTROLLER_EPOCH)} and p.role is Role.LEADER
        await rm.stop_async()
        core.close()

    asyncio.run(run())
    assert "start" in store.calls and "stop" in store.calls
    assert threads and set(threads) == {threading.main_thread().name}  # every store call stayed on the loop
