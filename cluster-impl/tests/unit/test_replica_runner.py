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


def late_controller_requests(tmp_path: Path) -> None:
    """Controller requests that arrive late — queued into a connection the controller closed when a
    cut broker stopped answering, and retransmitted by the kernel after the heal — never undo what the
    broker was told since: one addressed to an earlier registration is refused (KIP-380's broker
    epoch), an UpdateMetadata older than the applied one is moot, and a same-epoch LeaderAndIsr with
    an older ISR version leaves the ISR alone. (A container run's drain heard NOT_LEADER for a minute
    from a broker that had applied such a snapshot naming itself leader.)"""

    async def run() -> None:
        store = MemoryStore()
        core = _core(tmp_path)
        rm = ReplicaManager(core, store, inline)
        core.replication = rm
        await rm.start_async()
        assert rm.create_topic("t", 1, 1, {}) is Err.NONE
        tp = TopicPartition("t", 0)
        await _until(lambda: tp in core.partitions and core.partitions[tp].role is Role.LEADER
                     and "t" in core.metadata.topics)
        p = core.partitions[tp]
        epoch, ce = rm.broker_epoch, rm.state.controller_epoch
        now = core.metadata.topics["t"][0]
        stale = {"type": "update_metadata", "controller_id": 1, "controller_epoch": ce, "brokers": [],
                 "partitions": [{"topic": "t", "partition": 0, "leader": 7, "leader_epoch": 0, "replicas": [7],
                                 "isr": [7]}]}
        assert await rm.handle_internal({**stale, "broker_epoch": epoch - 1, "seq": 10**6}) == {
            "error": int(Err.STALE_BROKER_EPOCH)}
        assert core.metadata.topics["t"][0] == now
        assert await rm.handle_internal({**stale, "broker_epoch": epoch, "seq": 0}) == {"error": 0}
        assert core.metadata.topics["t"][0] == now, "an older snapshot replaced a newer one"
        isr_version = rm.state.zk_versions[tp]
        old_isr = {"type": "leader_and_isr", "controller_id": 1, "controller_epoch": ce, "broker_epoch": epoch,
                   "partitions": [{"topic": "t", "partition": 0, "leader": 1, "leader_epoch": p.leader_epoch,
                                   "isr": [1, 7], "replicas": [1], "zk_version": isr_version - 1}]}
        await rm.handle_internal(old_isr)
        assert p.isr == [1] and rm.state.zk_versions[tp] == isr_version
        await rm.stop_async()
        core.close()

    asyncio.run(run())


def test_late_controller_requests_change_nothing(tmp_path: Path) -> None:
    late_controller_requests(tmp_path)


def request_before_registration(tmp_path: Path) -> None:
    """A restarted broker that has not registered yet (its old registration's session has not
    expired) gets a LeaderAndIsr addressed to that old registration, from a controller cut off from
    the store: it must not act on it. It waits for its own registration, then refuses it as stale;
    one addressed to the new registration is applied. (Coverage-bench seed 44 on the simulator: the
    restarted broker followed the old controller's zombie leader, and the two acknowledged records
    with acks=all that the real leader never had.)"""

    async def run() -> None:
        store = MemoryStore()
        old_epoch = store.register_broker(1, "n1", 9092)  # the previous incarnation's registration
        core = _core(tmp_path)
        rm = ReplicaManager(core, store, inline)
        core.replication = rm
        order = {"type": "leader_and_isr", "controller_id": 2, "controller_epoch": 1, "broker_epoch": old_epoch,
                 "partitions": [{"topic": "t", "partition": 0, "leader": 2, "leader_epoch": 1, "isr": [1, 2],
                                 "replicas": [1, 2], "zk_version": 0}]}
        early = asyncio.ensure_future(rm.handle_internal(order))
        await asyncio.sleep(0.05)
        assert not early.done(), "a controller request was acted on before the broker registered"
        await rm.start_async()
        assert await early == {"error": int(Err.STALE_BROKER_EPOCH)}
        assert TopicPartition("t", 0) not in core.partitions or \
            core.partitions[TopicPartition("t", 0)].role is not Role.FOLLOWER
        await rm.stop_async()
        core.close()

    asyncio.run(run())


def test_a_request_before_registration_waits_and_one_for_the_old_registration_is_refused(tmp_path: Path) -> None:
    request_before_registration(tmp_path)


class _FlakyStore(MemoryStore):
    """A store whose connection times out once and whose first registration is lost with the
    connection, as a loaded ZooKeeper does."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = {"start": 1, "register_broker": 1}

    def _fail_once(self, what: str) -> None:
        if self.failures[what]:
            self.failures[what] -= 1
            raise ConnectionError(f"{what}: connection lost")

    def start(self) -> None:
        self._fail_once("start")
        super().start()

    def register_broker(self, bid: int, host: str, port: int, lost_data: str = "") -> int:
        self._fail_once("register_broker")
        return super().register_broker(bid, host, port, lost_data)


def test_a_broker_whose_store_fails_during_start_up_still_registers(tmp_path: Path) -> None:
    """A connection that timed out, or was lost before the registration, ended the start-up with an
    exception, and with it the process, just after it had opened its port: the cluster went on
    without it (a test cluster's setup on a loaded machine). The start-up now retries until it has
    registered, and says that this process started without its data even when the first attempt failed."""

    async def run() -> None:
        store = _FlakyStore()
        core = _core(tmp_path)
        rm = ReplicaManager(core, store, inline)
        core.replication = rm
        await asyncio.wait_for(rm.start_async(), 10)
        assert store.failures == {"start": 0, "register_broker": 0}
        assert 1 in store.brokers and rm.broker_epoch == store.brokers[1][2]
        assert store.calls.count("start") == 1, "the connection is started once it has succeeded"
        assert rm.lost_data, "a retry forgot that the log directory had no meta file"
        assert rm.controller.active
        await rm.stop_async()
        core.close()

    asyncio.run(run())
