"""`SimNode`: one node running the production broker — `BrokerCore`, `BrokerServer`, the replica
manager and controller, `ZkStore` — on the simulator's loop, network, ZooKeeper model and disk.

Model of a node's process:
- start: a new *incarnation* (`loop.Incarnation`) opens its logs (recovery runs as on a real
  start), connects to ZooKeeper once it can reach a quorum, registers and runs for controller.
- kill (SIGKILL): the incarnation's callbacks never run again, its connections are reset, its
  ZooKeeper session lives on until it expires; the files keep everything written.
- power loss: a kill, and each log keeps only what its last fsync covered plus a seeded part of
  the rest (`disk.py`).
- pause/resume (SIGSTOP/SIGCONT): the incarnation's callbacks and timers are held, then run with
  the view they had.
- probes: every broker counts its own coverage probes (`logbroker.probes`, scoped by the running
  incarnation: many brokers share this process), kept across its incarnations.
- clocks: monotonic time is the loop's (never skewed, as libfaketime leaves it in the containers);
  the wall clock is the loop's plus a skew the clock nemesis sets.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any

from logbroker import probes
from logbroker.bugs import parse_bugs
from logbroker.config import DEFAULTS, from_mapping
from logbroker.coord.zk import ZkStore
from logbroker.core.broker import BrokerCore
from logbroker.offload import inline
from logbroker.replication import attach
from logbroker.server import BrokerServer

from logsim.disk import Disk
from logsim.loop import NODE, Incarnation, SimLoop
from logsim.zookeeper import ZkClient

if TYPE_CHECKING:
    from logsim.cluster import SimCluster

log = logging.getLogger(__name__)
PORT = 9092
EPOCH_MS = 1_800_000_000_000  # the wall clock at simulated time 0 (late 2027)


#: the probe counts of a node while `SimNode.start` builds its broker (outside any incarnation's
#: context: what is scheduled there keeps the context it always had)
_starting: dict[str, int] | None = None


def _node_probes() -> dict[str, int] | None:
    """The probe counts of the node whose code runs now (None outside any node: the process's own)."""
    inc = NODE.get()
    return _starting if inc is None else inc.probes


probes.set_scope(_node_probes)


class NodeClock:
    """`logbroker.core.clock.Clock` on simulated time, with a settable wall-clock skew."""

    def __init__(self, loop: SimLoop) -> None:
        self.loop = loop
        self.skew_ms = 0

    def now_ms(self) -> int:
        return EPOCH_MS + int(self.loop.time() * 1000) + self.skew_ms

    def monotonic_ms(self) -> int:
        return int(self.loop.time() * 1000)


class SimNode:
    def __init__(self, cluster: SimCluster, name: str, broker_id: int, settings: dict[str, str],
                 bugs: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.name = name
        self.broker_id = broker_id
        self.data = cluster.data_root / name
        self.settings = settings
        self.bugs = bugs
        self.clock = NodeClock(cluster.loop)
        self.inc: Incarnation | None = None
        self.incarnations = 0
        self.core: BrokerCore | None = None
        self.server: BrokerServer | None = None
        self.log_lines: list[str] = []
        self.disk = Disk()
        self.probe_counts: dict[str, int] = {}

    @property
    def running(self) -> bool:
        return self.inc is not None and not self.inc.dead

    @property
    def paused(self) -> bool:
        return self.inc is not None and self.inc.paused

    def config(self) -> Any:
        props = {**DEFAULTS, "broker.id": str(self.broker_id), "listeners": f"PLAINTEXT://{self.name}:{PORT}",
                 "advertised.host": self.name, "advertised.port": str(PORT), "log.dirs": str(self.data),
                 "zookeeper.connect": "sim", **self.settings}
        return from_mapping(props, parse_bugs(self.bugs))

    def start(self) -> None:
        """Start the broker process (a no-op while it runs)."""
        if self.running:
            return
        loop = self.cluster.loop
        self.incarnations += 1
        inc = self.inc = Incarnation(self.name, self.incarnations, probes=self.probe_counts)
        global _starting
        _starting = self.probe_counts  # what opening the logs hits counts for this node
        try:
            self._start(loop, inc)
        finally:
            _starting = None

    def _start(self, loop: SimLoop, inc: Incarnation) -> None:
        cfg = self.config()
        core = self.core = BrokerCore(cfg, self.clock)
        core.load_partitions()
        net = self.cluster.net.host(self.name)
        client = ZkClient(self.cluster.zk, self.name, inc, cfg.zookeeper_session_timeout_ms / 1000)
        attach(core, ZkStore("sim", cfg.zookeeper_session_timeout_ms, client=client), inline, net)
        self.server = BrokerServer(core, net)
        loop.spawn(inc, self._boot(core, self.server, client), name=f"{self.name} boot")

    async def _boot(self, core: BrokerCore, server: BrokerServer, client: ZkClient) -> None:
        await server.start()
        server.server.answer = server.answer  # type: ignore[union-attr]  # decoded requests (network.py)
        while not client.reachable_now():  # kazoo's start waits for a connection
            await asyncio.sleep(0.5)
        await core.replication.start_async()  # type: ignore[attr-defined]

    def kill(self, *, power_loss: bool = False, rng: random.Random | None = None) -> dict[str, int]:
        """SIGKILL (files keep what was written), or a power loss (only what was fsynced): the bytes a
        power loss lost, per replica directory."""
        if not self.running:
            return {}
        assert self.inc is not None and self.core is not None
        lost: dict[str, int] = {}
        self.cluster.loop.kill(self.inc)
        self.cluster.net.process_died(self.inc, kernel_too=power_loss)
        if power_loss:
            lost = self.disk.power_loss(self.core, rng or random.Random(0))
            self.note(f"power loss: unflushed bytes lost {dict(sorted(lost.items()))}")
        else:
            self.disk.crash(self.core)
        self.core = None
        self.server = None
        return dict(sorted(lost.items()))

    def pause(self) -> None:
        if self.running and self.inc is not None:
            self.cluster.loop.pause(self.inc)

    def resume(self) -> None:
        if self.inc is not None and not self.inc.dead:
            self.cluster.loop.resume(self.inc)

    def stop(self) -> None:
        """Shut down cleanly at the end of a run (SIGTERM): flush, checkpoint, close files."""
        if self.running and self.core is not None:
            self.resume()
            self.core.close()
            assert self.inc is not None
            self.cluster.loop.kill(self.inc)
            self.cluster.net.process_died(self.inc)
            self.core = None

    def note(self, line: str) -> None:
        self.log_lines.append(f"{self.cluster.loop.time():10.3f} SIM {line}")
