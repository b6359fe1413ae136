"""KIP-966's strict min ISR rule (KAFKA-15583): a leader whose committed ISR is smaller than the
effective min.insync.replicas does not advance its high watermark.

The controller keeps a replica that leaves such an ISR as an eligible leader, because nothing can be
committed without it. Seed 70150 of the simulator showed what happens otherwise: n2, left alone in
the ISR of chaos-0 (n3 restarting, kept eligible), took HW from 179 to its LEO 192, consumers read
179..191, n2 was cut off, the next controller elected n3 (LEO 179), and the offsets consumers had
read were written again with other records.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from logbroker.config import DEFAULTS, from_mapping
from logbroker.core.broker import BrokerCore
from logbroker.core.clock import ManualClock
from logbroker.core.partition import Partition, Role, TopicPartition
from logbroker.log.log import Log, LogConfig
from logbroker.offload import inline
from logbroker.replication.manager import ReplicaManager
from memstore import MemoryStore

TP = TopicPartition("t", 0)


def _values(n: int, first: int = 0) -> bytes:
    from rawclient import batch
    return batch([f"v{first + i}".encode() for i in range(n)])


def _leader_and_isr(epoch: int, isr: list[int]) -> dict[str, object]:
    """What the controller of epoch 1 (this broker) sends: broker 1 leads t-0 of replicas [1, 2, 3]."""
    return {"type": "leader_and_isr", "controller_id": 1, "controller_epoch": 1,
            "partitions": [{"topic": "t", "partition": 0, "leader": 1, "leader_epoch": epoch, "isr": isr,
                            "replicas": [1, 2, 3], "zk_version": epoch}]}


def one_broker(tmp_path: Path, **settings: str) -> BrokerCore:
    """Broker 1's core on a manual clock, its partitions loaded, with `settings` over the defaults."""
    cfg = from_mapping({**DEFAULTS, "broker.id": "1", "log.dirs": str(tmp_path), "zookeeper.connect": "memory",
                        "listeners": "PLAINTEXT://127.0.0.1:9092", "auto.leader.rebalance.enable": "false",
                        **settings})
    core = BrokerCore(cfg, ManualClock(1_000))
    core.load_partitions()
    return core


async def replicating(core: BrokerCore) -> ReplicaManager:
    """A started replica manager over an in-memory ZooKeeper store, plugged into `core`."""
    rm = ReplicaManager(core, MemoryStore(), inline)
    core.replication = rm
    await rm.start_async()
    return rm


def test_a_leader_alone_in_its_isr_keeps_hw_under_min_insync(tmp_path: Path) -> None:
    """Seed 70150 in one broker: records appended while the ISR was [1, 2] (2 never fetched them),
    then the controller shrinks the ISR to [1] (2 stays an eligible leader, min.insync.replicas 2).
    HW stays where 2 has everything; it went to the LEO before (`maybe_advance_hw` over the ISR
    alone), so the records 2 lacks were readable and an election of 2 lost them."""
    core = one_broker(tmp_path, **{"min.insync.replicas": "2"})

    async def run() -> None:
        rm = await replicating(core)
        assert (await rm.handle_internal(_leader_and_isr(1, [1, 2])))["error"] == 0
        p = core.partitions[TP]
        assert p.role is Role.LEADER and p.isr == [1, 2]
        p.append_as_leader(_values(5))
        rm.on_leader_append(p)
        assert (p.leo, p.hw) == (5, 0), "2 has not fetched: nothing is committed"
        assert (await rm.handle_internal(_leader_and_isr(2, [1])))["error"] == 0
        assert p.isr == [1]
        assert p.hw == 0, "under min ISR, the leader's own LEO is not a high watermark"
        p.append_as_leader(_values(3, 5))
        rm.on_leader_append(p)
        assert p.hw == 0
        await rm.stop_async()

    try:
        asyncio.run(run())
    finally:
        core.close()


def test_an_expansion_the_controller_has_not_written_does_not_lift_the_partition_to_min_isr(
        tmp_path: Path) -> None:
    """KIP-497's expansion counts for HW at once (it only makes HW more careful), but not as an ISR
    member for min ISR until the controller writes it: with ISR [1] and eligible leaders [2, 3], 2
    catching up must not commit what 3 lacks, since 3 may still be elected."""
    p = Partition(TP, Log(tmp_path / "t-0", LogConfig(), lambda: 0), broker_id=1, role=Role.LEADER, replicas=[1, 2, 3])
    p.set_isr([1])
    p.append_as_leader(_values(4))
    p.record_follower_fetch(2, 4, 1_000)
    p.set_isr([1, 2], committed=False)
    assert p.under_min_isr(2) and not p.maybe_advance_hw(2) and p.hw == 0
    p.set_isr([1, 2])  # the controller's answer
    assert not p.under_min_isr(2) and p.maybe_advance_hw(2) and p.hw == 4
    p.log.close()
