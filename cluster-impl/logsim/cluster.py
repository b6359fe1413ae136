"""`SimCluster`: n simulated nodes, their network and ZooKeeper, on one seeded loop; the faults the
nemesis may apply; and the views the harness needs (controller, leaders, ISR, replica dumps).

Everything random is drawn from streams named after the seed (the loop's tie-breaking, each link's
delays, each power loss's torn writes), so a seed and a sequence of calls give one history.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logbroker.coord import paths
from logbroker.core.partition import Partition, TopicPartition
from logbroker.dump import PROBES_FILE, dump_partition
from logbroker.probes import BUG_PROBES, PROBES, node_file

from logsim.loop import NODE, SimLoop
from logsim.network import SimNetwork
from logsim.node import SimNode
from logsim.rng import Streams
from logsim.rng import streams as rng_streams
from logsim.zookeeper import ZooKeeperModel

#: broker settings of a simulated cluster (as the container deployment's, harness/systems/logbroker/db.py)
SIM_DEFAULTS = {
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": "3",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
}


class NodeLogs(logging.Handler):
    """The broker's log lines, to the node whose code wrote them, stamped with simulated time."""

    def __init__(self, cluster: SimCluster) -> None:
        super().__init__(logging.INFO)
        self.cluster = cluster

    def emit(self, record: logging.LogRecord) -> None:
        inc = NODE.get()
        node = self.cluster.nodes.get(inc.node) if inc is not None else None
        if node is not None:
            node.log_lines.append(f"{self.cluster.loop.time():10.3f} {record.levelname} {record.name}: "
                                  f"{record.getMessage()}")


def _scratch_root() -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="logsim-", dir=shm if shm.is_dir() else None))


class SimCluster:
    def __init__(self, seed: int, n: int, *, settings: dict[str, str] | None = None, bugs: tuple[str, ...] = (),
                 data_root: Path | None = None, log_level: int = logging.INFO, streams: Streams | None = None) -> None:
        """`streams`: every random stream of the simulation, by path (default: `rng.streams(seed)`; the
        harness passes its own `kernel.rng` rule)."""
        self.seed = seed
        self.streams = streams or rng_streams(seed)
        self.loop = SimLoop(seed, self.streams("loop"))
        self.net = SimNetwork(self.loop, seed, self.streams)
        self.names = [f"n{i + 1}" for i in range(n)]
        self.zk = ZooKeeperModel(self.loop, self.names, self.zk_reachable)
        self.zk_drops: Counter[tuple[str, str]] = Counter()  # (server, client): stacked ZooKeeper-port grudges
        self._own_root = data_root is None
        self.data_root = data_root or _scratch_root()
        self.settings = {**SIM_DEFAULTS, **(settings or {})}
        self.nodes = {name: SimNode(self, name, i + 1, self.settings, bugs) for i, name in enumerate(self.names)}
        self._logs = NodeLogs(self)
        self._log_level = log_level
        self._rng = self.streams("power-loss")

    def __enter__(self) -> SimCluster:
        lg = logging.getLogger("logbroker")
        self._saved_level = lg.level
        lg.setLevel(self._log_level)
        lg.addHandler(self._logs)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        lg = logging.getLogger("logbroker")
        lg.removeHandler(self._logs)
        lg.setLevel(getattr(self, "_saved_level", logging.NOTSET))
        for n in self.nodes.values():
            if n.running and n.core is not None:
                n.disk.crash(n.core)
        self.loop.shutdown()
        if self._own_root:
            shutil.rmtree(self.data_root, ignore_errors=True)

    # --- connectivity ----------------------------------------------------------------------------
    def zk_reachable(self, a: str, b: str) -> bool:
        return self.net.reachable(a, b) and (b, a) not in self.zk_drops and (a, b) not in self.zk_drops

    def cut_zk(self, grudge: Mapping[str, list[str]]) -> None:
        """ZooKeeper-port grudges (server -> the clients it drops); they stack as iptables rules do,
        so overlapping faults on one pair lift one at a time."""
        for dst, srcs in grudge.items():
            for src in srcs:
                self.zk_drops[(dst, src)] += 1

    def uncut_zk(self, grudge: Mapping[str, list[str]]) -> None:
        for dst, srcs in grudge.items():
            for src in srcs:
                if self.zk_drops[(dst, src)] > 1:
                    self.zk_drops[(dst, src)] -= 1
                else:
                    self.zk_drops.pop((dst, src), None)

    def rng(self, *path: object) -> random.Random:
        return self.streams(*path)

    # --- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        for n in self.nodes.values():
            n.start()

    def node_of(self, broker_id: int) -> str | None:
        return self.names[broker_id - 1] if 1 <= broker_id <= len(self.names) else None

    def run_for(self, seconds: float) -> None:
        self.loop.advance_to(self.loop.time() + seconds)

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        """Write the topic into ZooKeeper as a broker's CreateTopics would; the controller takes over."""
        from logbroker.controller.decisions import place_replicas

        live = [n.broker_id for n in self.nodes.values()]
        asg = place_replicas(partitions, replication_factor, live, start=0)
        root = self.zk.nodes
        if paths.topic(topic) in root:
            return
        for path in ("/config", paths.CONFIG_TOPICS, "/brokers", paths.TOPICS):
            if path not in root:
                self.zk._create(path, b"", 0)
        self.zk._create(paths.topic_config(topic), json.dumps({"version": 1, "config": {}}).encode(), 0)
        body = {"version": 2, "partitions": {str(p): r for p, r in sorted(asg.items())},
                "adding_replicas": {}, "removing_replicas": {}}
        self.zk._create(paths.topic(topic), json.dumps(body).encode(), 0)

    # --- views (from the ZooKeeper model, as the harness reads the real one) -----------------------
    def _get(self, path: str) -> Any:
        n = self.zk.nodes.get(path)
        return json.loads(n.data) if n is not None and n.data else None

    def controller(self) -> str | None:
        d = self._get(paths.CONTROLLER)
        return self.node_of(int(d["brokerid"])) if d else None

    def partition_state(self, topic: str, p: int) -> dict[str, Any] | None:
        st = self._get(paths.partition_state(topic, p))
        asg = self._get(paths.topic(topic))
        if st is None or asg is None:
            return None
        return {**st, "replicas": list(asg["partitions"].get(str(p), []))}

    def leader(self, topic: str, p: int) -> str | None:
        st = self._get(paths.partition_state(topic, p))
        return self.node_of(int(st["leader"])) if st and int(st["leader"]) >= 0 else None

    def controller_epoch(self) -> int | None:
        n = self.zk.nodes.get(paths.CONTROLLER_EPOCH)
        return int(n.data) if n is not None and n.data else None

    def registration(self, broker_id: int) -> int | None:
        """The czxid of the broker's registration under /brokers/ids (its broker epoch), if any."""
        n = self.zk.nodes.get(paths.broker(broker_id))
        return n.czxid if n is not None else None

    def lost_data_pending(self, broker_id: int) -> bool:
        """Whether the broker's registration says its process started without its data (KIP-966) and
        no controller has handled that process yet: until one has, the ISRs are about to change."""
        n = self.zk.nodes.get(paths.broker(broker_id))
        incarnation = str(json.loads(n.data).get("lost_data") or "") if n is not None else ""
        handled = self.zk.nodes.get(paths.lost_data_handled(broker_id))
        return bool(incarnation) and (handled is None or handled.data.decode() != incarnation)

    def leader_partition(self, topic: str, p: int) -> Partition | None:
        """The partition object of the leader the metadata names; None when it names none, or its
        process is down or paused, or that broker does not think it leads."""
        name = self.leader(topic, p)
        node = self.nodes.get(name or "")
        if node is None or node.core is None or node.paused:
            return None
        part = node.core.partitions.get(TopicPartition(topic, p))
        return part if part is not None and part.is_leader() else None

    def leader_end(self, topic: str, p: int) -> tuple[int, int, int] | None:
        """(high watermark, log end, leader epoch) as the partition's leader sees them (`leader_partition`)."""
        part = self.leader_partition(topic, p)
        return None if part is None else (part.hw, part.leo, part.leader_epoch)

    def stable_end(self, topic: str, p: int) -> tuple[int, int] | None:
        """(last stable offset, high watermark) as the partition's leader holds them (`leader_partition`)."""
        part = self.leader_partition(topic, p)
        return None if part is None else (part.lso, part.hw)

    def live_brokers(self) -> list[int]:
        ids = self.zk.nodes.get(paths.BROKER_IDS)
        return sorted(int(c) for c in ids.children) if ids is not None else []

    def recovered(self, topic: str, partitions: int, replication_factor: int) -> bool:
        """Every partition has a live leader and a full ISR, each leader broker agrees, and its high
        watermark has caught up with its log end: a leader that just restarted starts from its HW
        checkpoint (up to a second old) until its followers fetch again, and a drain that took that
        HW as the end would stop short of acknowledged records (seed 5077 of the default mix)."""
        live = set(self.live_brokers())
        for p in range(partitions):
            st = self.partition_state(topic, p)
            if st is None or st["leader"] not in live or len(st["isr"]) < replication_factor:
                return False
            node = self.nodes[self.node_of(st["leader"]) or ""]
            if node.core is None or node.paused:
                return False
            part = node.core.partitions.get(TopicPartition(topic, p))
            if part is None or not part.is_leader() or part.leader_epoch != st["leader_epoch"] or part.hw < part.leo:
                return False
        return True

    def dump_replicas(self, name: str) -> dict[str, bytes]:
        """Each replica's log as the container runs' dump tool writes it (`logbroker.dump`), and the node's
        probe counts as `probes.json` (read directly: its brokers count in this process)."""
        out = {}
        root = self.data_root / name
        if not root.is_dir():
            return {}
        for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name.rpartition("-")[2].isdigit()
                        and not p.name.startswith("__")):
            lines = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in dump_partition(d))
            out[f"{d.name}.jsonl"] = lines.encode()
        node = self.nodes[name]
        out[PROBES_FILE] = json.dumps(node_file(node.probe_counts, node.incarnations)).encode()
        return out

    # --- faults ----------------------------------------------------------------------------------
    def wipe(self, name: str) -> None:
        """The node's log directory is lost (a replaced disk): nothing of it is left. The node must be
        down; it starts again empty, with the same broker id."""
        node = self.nodes[name]
        if node.running:
            raise RuntimeError(f"{name} is running: its disk can be lost only while it is down")
        shutil.rmtree(node.data, ignore_errors=True)
        node.disk.durable.clear()
        node.note("disk lost: the log directory is gone")

    def power_loss(self, name: str) -> dict[str, int]:
        """The node loses power: bytes lost per replica directory."""
        return self.nodes[name].kill(power_loss=True, rng=self._rng)


def probe_registry() -> tuple[dict[str, str], dict[str, str]]:
    """The probes of the broker these simulated nodes run (name -> dangerous state) and each bug
    switch's probe: what a simulated run's counts are counted against, for a reader that has counts
    but no run directory carrying the registry (a night's simulator search)."""
    return dict(PROBES), dict(BUG_PROBES)
