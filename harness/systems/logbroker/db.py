"""`LogbrokerDB`: our system under test deployed on nodes — a ZooKeeper ensemble and one broker per node.

It acts on nodes only through `Remote` (so docker nodes and real machines are driven the same way)
and reads cluster metadata (who is controller, who leads a partition) from ZooKeeper with kazoo from
the control host, for targeted faults. Broker ids follow node order: n1 is broker 1.

Processes are found by the pid files of `kernel.layout`; every operation is idempotent, because
nemeses and teardown may repeat them on any exit path. The adapter is created from settings alone
and bound to the run's nodes by `setup(cluster)` (or `attach(cluster)` for a cluster that is
already deployed, as `chaos heal` does).
"""

from __future__ import annotations

import functools
import json
import logging
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from harness.db import faketime, kafka_admin, lazyfs, pidfile
from harness.db.every_node import on_every_node
from harness.db.iptables import IptablesCapability
from harness.db.kafka_reads import KafkaReads
from harness.db.node_locks import NodeLocks
from harness.db.offsets import leader_ends
from harness.systems.logbroker import layout as bl
from harness.systems.logbroker import zk_layout as zkp
from harness.systems.logbroker import zookeeper
from harness.systems.logbroker.decl import DECL
from harness.systems.logbroker.settings import BrokerSettings
from kernel import layout
from kernel.db import Cluster, LeaderEnd, PartitionState, recovered
from kernel.errors import ChaosError, ProvisionError, UsageError
from kernel.node import Node
from kernel.remote import Remote

log = logging.getLogger(__name__)


def _reason(e: BaseException) -> str:
    """kazoo's exceptions often carry no message (`ConnectionLoss()`): name the class then."""
    return str(e) or type(e).__name__

PROCESSES = ("broker", "zookeeper")


def broker_id(nodes: list[Node], node: Node) -> int:
    return [n.name for n in nodes].index(node.name) + 1


def broker_properties(nodes: list[Node], node: Node, settings: BrokerSettings) -> str:
    """The broker's config file: Kafka's key names, so operators read it without a glossary."""
    zk = ",".join(f"{n.ip}:{bl.ZK_CLIENT_PORT}" for n in nodes)
    props: dict[str, str] = {
        "broker.id": str(broker_id(nodes, node)),
        "listeners": f"PLAINTEXT://0.0.0.0:{bl.BROKER_PORT}",
        "advertised.host": node.ip,
        "log.dirs": bl.BROKER_DATA,
        "num.partitions": str(settings.partitions),
        "default.replication.factor": str(min(settings.replication_factor, len(nodes))),
        "min.insync.replicas": str(settings.min_insync_replicas),
        "unclean.leader.election.enable": str(settings.unclean_leader_election).lower(),
        "zookeeper.connect": zk,
        "zookeeper.session.timeout.ms": str(settings.session_timeout_ms),
        "replica.lag.time.max.ms": str(settings.replica_lag_time_max_ms),
        "auto.create.topics.enable": "false",
        # librdkafka looks up a group coordinator for any consumer with a group.id (the assign-mode
        # queue consumers have one), which creates __consumer_offsets: Kafka's 50 partitions would
        # add 150 replicas to every failover's elections for offsets no assign-mode check reads
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": str(min(3, len(nodes))),
        "probes.dir": bl.BROKER_PROBES,
    }
    if settings.flush_messages is not None:
        props["flush.messages"] = str(settings.flush_messages)
    props.update(settings.extra)
    return "".join(f"{k}={v}\n" for k, v in props.items())


@functools.cache
def known_bugs() -> tuple[str, ...]:
    """The broker's bug switches, asked of the broker program itself (`python -m logbroker
    --list-bugs`), so the names live in one place: cluster-impl/logbroker/bugs.py."""
    try:
        out = subprocess.run([sys.executable, "-m", "logbroker", "--list-bugs"], capture_output=True, text=True,
                             timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise UsageError(f"cannot list the broker's bug switches (is cluster-impl installed? `make venv`): {e}"
                         ) from None
    return tuple(line.strip() for line in out.splitlines() if line.strip())


def check_bugs(names: tuple[str, ...]) -> None:
    known = known_bugs()
    for b in names:
        if b not in known:
            raise UsageError(f"unknown bug switch {b!r}; known: {', '.join(known)}")


class LogbrokerDB(KafkaReads, IptablesCapability):
    """Implements DB, Killable, Pausable, HasLogFiles, HasReplicaDumps, ClusterView, Reassignable
    (Admin), and the fault capabilities Net (iptables), Clock (libfaketime) and Disk (lazyfs)."""

    system = DECL

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.nodes: list[Node] = []
        self.remotes: Mapping[str, Remote] = {}
        self._zk_lock = threading.Lock()
        self._locks = NodeLocks()
        self._zk: object | None = None  # a kazoo.client.KazooClient, created lazily
        # broker id -> the czxid of the registration it had when we (re)started it (None: it had none);
        # until a newer one appears, the old ephemeral of a killed process may still be listed (recovered)
        self._restarting: dict[int, int | None] = {}

    def attach(self, cluster: Cluster) -> LogbrokerDB:
        """Bind to nodes that already run (or are about to run) the cluster."""
        self.nodes = list(cluster.nodes)
        self.remotes = cluster.remotes
        return self

    # --- helpers -------------------------------------------------------------------------------
    def _r(self, node: Node) -> Remote:
        return self.remotes[node.name]

    def node_by_broker_id(self, bid: int) -> Node | None:
        return self.nodes[bid - 1] if 1 <= bid <= len(self.nodes) else None

    def broker_id(self, node: Node) -> int:
        return broker_id(self.nodes, node)

    def client_address(self, node: Node) -> str:
        return f"{node.ip}:{bl.BROKER_PORT}"

    def deployed(self, node: Node) -> bool:
        """Whether a broker was deployed on `node` (its config file exists): `chaos heal` restarts only those."""
        return self._r(node).exec(f"test -f {bl.BROKER_CONFIG}", check=False).ok

    def bootstrap_servers(self) -> str:
        return ",".join(self.client_address(n) for n in self.nodes)

    def zk_connect(self) -> str:
        return ",".join(f"{n.ip}:{bl.ZK_CLIENT_PORT}" for n in self.nodes)

    # --- DB ------------------------------------------------------------------------------------
    def setup(self, cluster: Cluster, *, timeout: float = 90.0) -> None:
        self.attach(cluster)
        self.setup_all(timeout=timeout)

    def teardown(self, cluster: Cluster) -> None:
        self.attach(cluster)
        self.teardown_all()

    def create_topic(self, topic: str, partitions: int, replication_factor: int, *, timeout: float = 60.0) -> None:
        """Create the topic through Kafka's admin API, then wait until every partition has a leader."""
        kafka_admin.create_topic(self.bootstrap_servers(), len(self.nodes), topic, partitions, replication_factor,
                                 lambda p: self.leader(topic, p) is not None, timeout=timeout)

    def recovered(self, topic: str, partitions: int, replication_factor: int) -> bool:
        return recovered(self, topic, partitions, replication_factor)

    def restarts_registered(self) -> bool:
        """Every broker we (re)started has a newer registration than it had then, and a controller
        has handled it if it says its process lost its data (read only while a restart is
        unconfirmed).

        Why the second part: a broker restarted within the session timeout of its killed process
        was never out of the ISRs, so they look whole from the moment it registers until the
        controller takes it out of every one (KIP-966) — a CI run read that moment as recovered."""
        if self._restarting:
            registered = self._registrations()
            if registered is None:
                return False
            for bid, old in list(self._restarting.items()):
                if registered.get(bid, old) == old or self._lost_data_pending(bid):
                    return False
                self._restarting.pop(bid, None)
        return True

    def _lost_data_pending(self, bid: int, timeout: float = 3.0) -> bool:
        """Whether broker `bid`'s registration carries a lost-data incarnation no controller has
        handled yet (`LOST_DATA_HANDLED`); True when ZooKeeper does not answer (not known to be settled)."""
        from kazoo.exceptions import KazooException, NoNodeError
        from kazoo.handlers.threading import KazooTimeoutError

        zk = self._client()
        try:
            raw, _ = zk.get_async(f"{zkp.BROKER_IDS}/{bid}").get(timeout=timeout)
            incarnation = str(json.loads(raw).get("lost_data") or "")
            if not incarnation:
                return False
            try:
                handled, _ = zk.get_async(f"{zkp.LOST_DATA_HANDLED}/{bid}").get(timeout=timeout)
            except NoNodeError:
                return True
            return bool(handled.decode() != incarnation)
        except NoNodeError:
            return True  # registered a moment ago and gone again: not settled
        except (KazooException, KazooTimeoutError, OSError, ValueError) as e:
            log.warning("ZooKeeper read of broker %d's registration failed: %s", bid, _reason(e))
            return True

    def leader_ends(self, topic: str, partitions: int) -> dict[int, LeaderEnd]:
        """Asked of each partition's leader with ListOffsets (a replica's ListOffsets gets the log end)."""
        out: dict[int, LeaderEnd] = {}
        for name, keys in self.by_leader(topic, partitions).items():
            node = self.node_named(name)
            out.update(leader_ends(self.client_address(node), self.broker_id(node), topic, keys))
        return out

    def _registrations(self, timeout: float = 3.0) -> dict[int, int] | None:
        """Broker id -> the czxid of its current registration under /brokers/ids; None when ZooKeeper
        does not answer within `timeout` (this is asked on the way to restarting a broker, which
        must never hang on it)."""
        from kazoo.exceptions import KazooException, NoNodeError
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            zk = self._client()
            children = [c for c in zk.get_children_async(zkp.BROKER_IDS).get(timeout=timeout) if c.isdigit()]
            pending = {int(c): zk.exists_async(f"{zkp.BROKER_IDS}/{c}") for c in children}  # in flight together
            out = {}
            for bid, reply in pending.items():
                try:
                    stat = reply.get(timeout=timeout)
                except NoNodeError:
                    continue
                if stat is not None:
                    out[bid] = int(stat.czxid)
            return out
        except NoNodeError:
            return {}  # no broker has registered yet: /brokers/ids is made by the first one
        except (KazooException, KazooTimeoutError, OSError) as e:
            log.warning("ZooKeeper read of %s failed: %s", zkp.BROKER_IDS, _reason(e))
            return None

    def setup_all(self, *, timeout: float = 90.0) -> None:
        """ZooKeeper everywhere first (a quorum must form), then the brokers; wait until all answer."""
        for node in self.nodes:
            self._install_configs(node)
        for node in self.nodes:
            self.start_zookeeper(node)
        self._wait_zookeeper_quorum(timeout)
        for node in self.nodes:
            self.start(node)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            self._wait_port(node, bl.BROKER_PORT, deadline)
        self._wait_brokers_registered(deadline)
        self._wait_metadata(deadline)

    def teardown_all(self) -> None:
        self.close()
        on_every_node(self.nodes, self.teardown_node, "teardown")

    def setup_node(self, node: Node) -> None:
        self._install_configs(node)
        self.start_zookeeper(node)
        self.start(node)

    def teardown_node(self, node: Node) -> None:
        for process in PROCESSES:
            self.resume(node, process=process)
        self.kill(node)
        self.kill_zookeeper(node)
        self._unmount_disk(node)
        self._r(node).exec(
            f"rm -rf {bl.BROKER_DATA} {bl.BROKER_DISK} {bl.ZK_DATA} {bl.BROKER_PROBES}; {faketime.reset_cmd()}",
            timeout=30,
        )

    def _install_configs(self, node: Node) -> None:
        r = self._r(node)
        r.exec(f"mkdir -p /etc/chaos {layout.LOG_DIR} {layout.RUN_DIR} {bl.BROKER_DATA} {bl.BROKER_DISK} "
               f"{bl.ZK_DATA}")
        self._mount_disk(node)
        r.put(bl.ZK_CONFIG, zookeeper.zoo_cfg(self.nodes).encode())
        r.put(f"{bl.ZK_DATA}/myid", f"{zookeeper.myid(self.nodes, node)}\n".encode())
        r.put(bl.BROKER_CONFIG, broker_properties(self.nodes, node, self.settings).encode())
        r.exec(f"[ -f {layout.FAKETIME_FILE} ] || echo +0 > {layout.FAKETIME_FILE}")

    # --- processes -----------------------------------------------------------------------------
    def _pidfile(self, process: str) -> str:
        if process not in PROCESSES:
            raise ValueError(f"unknown process {process!r}; expected one of {PROCESSES}")
        return bl.BROKER_PIDFILE if process == "broker" else bl.ZK_PIDFILE

    def pid(self, node: Node, process: str = "broker") -> int | None:
        res = self._r(node).exec(pidfile.alive_cmd(self._pidfile(process)), check=False, timeout=15)
        return pidfile.parse_pid(res.stdout, res.ok)

    def broker_pid(self, node: Node) -> int | None:
        return self.pid(node, "broker")

    def zookeeper_pid(self, node: Node) -> int | None:
        return self.pid(node, "zookeeper")

    def start(self, node: Node) -> None:
        """Start the broker under libfaketime (START_BROKER in the image) unless it already runs
        (one fault at a time per node: `harness/db/node_locks.py`)."""
        with self._locks.of(node):
            if self.broker_pid(node) is not None:
                return
            registered = self._registrations()
            if registered is not None:  # unknown: any registration will do, as before
                self._restarting[self.broker_id(node)] = registered.get(self.broker_id(node))
            bugs = " ".join(f"--bug {shlex.quote(b)}" for b in self.settings.bugs)
            self._r(node).exec(f"rm -f {bl.BROKER_PIDFILE}; {bl.START_BROKER} {bugs}", timeout=30)

    def kill(self, node: Node) -> None:
        with self._locks.of(node):
            self._kill(node, "broker")

    def start_zookeeper(self, node: Node) -> None:
        self._r(node).exec(zookeeper.start_command(), timeout=30)

    def kill_zookeeper(self, node: Node) -> None:
        self._kill(node, "zookeeper")

    def _kill(self, node: Node, process: str) -> None:
        self._r(node).exec(pidfile.kill_cmd(self._pidfile(process)), timeout=30)

    def pause(self, node: Node, *, process: str = "broker") -> None:
        self._signal(node, process, "STOP")

    def resume(self, node: Node, *, process: str = "broker") -> None:
        self._signal(node, process, "CONT")

    def _signal(self, node: Node, process: str, sig: str) -> None:
        self._r(node).exec(pidfile.signal_cmd(self._pidfile(process), sig), timeout=15)

    # --- Disk: the broker's data directory on lazyfs (harness/db/lazyfs.py) -------------------------
    def _mount_disk(self, node: Node) -> None:
        lazyfs.mount(self._r(node), bl.BROKER_DATA, bl.BROKER_DISK)

    def _unmount_disk(self, node: Node) -> None:
        lazyfs.unmount(self._r(node), bl.BROKER_DATA)

    def crash(self, node: Node, *, lose_unfsynced: bool) -> dict[str, Any]:
        """SIGKILL the broker; with `lose_unfsynced`, lazyfs then forgets every write it did not fsync.
        Returns bytes lost per replica directory."""
        self.kill(node)
        return lazyfs.lose_unfsynced(self._r(node)) if lose_unfsynced else {}

    def wipe(self, node: Node) -> None:
        """The broker's log directory is gone: everything in it is deleted (through the mount)."""
        lazyfs.wipe(self._r(node), bl.BROKER_DATA)

    # --- Net and Clock ---------------------------------------------------------------------------
    def set_clock(self, node: Node, seconds: float) -> None:
        """libfaketime's offset file, which the broker reads on every wall-clock call."""
        faketime.set_clock(self._r(node), seconds)

    # --- files ---------------------------------------------------------------------------------
    def logs(self, node: Node) -> dict[str, bytes]:
        out = {}
        for path in (bl.BROKER_LOG, bl.ZK_LOG, bl.BROKER_CONFIG, bl.ZK_CONFIG, layout.LAZYFS_LOG):
            try:
                out[path.rsplit("/", 1)[-1]] = self._r(node).get(path)
            except ChaosError as e:
                log.warning("%s: could not copy %s: %s", node.name, path, e)
        return out

    def dump_replicas(self, node: Node) -> dict[str, bytes]:
        """Run the broker's dump tool on the node and fetch its JSON Lines files and probe counts."""
        r = self._r(node)
        out = "/tmp/chaos-replica-dump"
        r.exec(
            f"rm -rf {out} && mkdir -p {out} && {bl.DUMP_REPLICAS} --log-dirs {bl.BROKER_DATA} --out {out} "
            f"--probes-dir {bl.BROKER_PROBES}",
            timeout=120,
        )
        names = r.exec(f"ls {out}", timeout=15).stdout.split()
        return {name: r.get(f"{out}/{name}") for name in names if name.endswith(".jsonl") or name == "probes.json"}

    # --- readiness -----------------------------------------------------------------------------
    def _wait_zookeeper_quorum(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = list(self.nodes)
        while pending:
            node = pending[0]
            res = self._r(node).exec(zookeeper.probe_command("srvr"), check=False, timeout=10)
            if res.ok and "Mode:" in res.stdout:
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise ProvisionError(
                    f"ZooKeeper on {node.name} did not join a quorum within {timeout:.0f} s; "
                    f"see {bl.ZK_LOG} on that node"
                )
            time.sleep(0.5)

    def _wait_port(self, node: Node, port: int, deadline: float) -> None:
        while True:
            try:
                with socket.create_connection((node.ip, port), timeout=2):
                    return
            except OSError as e:
                if time.monotonic() > deadline:
                    raise ProvisionError(
                        f"the broker on {node.name} ({node.ip}:{port}) did not start: {e}; "
                        f"see {bl.BROKER_LOG} on that node"
                    ) from None
                time.sleep(0.3)

    def _wait_brokers_registered(self, deadline: float) -> None:
        want = {str(broker_id(self.nodes, n)) for n in self.nodes}
        while True:
            ids = set(self._zk_children(zkp.BROKER_IDS) or [])
            if want <= ids:
                return
            if time.monotonic() > deadline:
                raise ProvisionError(
                    f"brokers {sorted(want - ids)} did not register in ZooKeeper (/brokers/ids has {sorted(ids)})"
                )
            time.sleep(0.3)

    def _wait_metadata(self, deadline: float) -> None:
        """Registered is not serving: a broker learns the controller and its peers only from the
        controller's first UpdateMetadata. Until then it answers Metadata with controller -1, and an
        admin client that asked it waits for a controller that it is never told about (librdkafka
        re-asks only on its next periodic refresh) - a CreateTopics right after set-up hung for 30 s.
        So each broker must answer with every broker and a controller before set-up returns."""
        for node in self.nodes:
            kafka_admin.wait_serving(self.client_address(node), len(self.nodes), deadline,
                                     f"{bl.BROKER_LOG} on {node.name}")

    # --- ClusterView (ZooKeeper, read from the control host) -----------------------------------
    def _client(self):  # type: ignore[no-untyped-def]
        from kazoo.client import KazooClient

        with self._zk_lock:
            if self._zk is None:
                zk = KazooClient(hosts=self.zk_connect(), timeout=5.0, read_only=False)
                zk.start(timeout=15)
                self._zk = zk
            return self._zk

    def _zk_get(self, path: str) -> bytes | None:
        from kazoo.exceptions import KazooException, NoNodeError

        try:
            data, _ = self._client().get(path)
            return bytes(data) if data is not None else None
        except NoNodeError:
            return None
        except (KazooException, OSError) as e:
            log.warning("ZooKeeper read of %s failed: %s", path, _reason(e))
            return None

    def _zk_children(self, path: str) -> list[str] | None:
        from kazoo.exceptions import KazooException, NoNodeError

        try:
            return list(self._client().get_children(path))
        except NoNodeError:
            return None
        except (KazooException, OSError) as e:
            log.warning("ZooKeeper listing of %s failed: %s", path, e)
            return None

    def controller(self) -> Node | None:
        raw = self._zk_get(zkp.CONTROLLER)
        if not raw:
            return None
        bid = json.loads(raw).get("brokerid")
        return self.node_by_broker_id(int(bid)) if bid is not None else None

    def controller_epoch(self) -> int | None:
        raw = self._zk_get(zkp.CONTROLLER_EPOCH)
        return int(raw.decode().strip()) if raw else None

    def partition_state(self, topic: str, partition: int) -> dict | None:  # type: ignore[type-arg]
        """The raw state znode: {"leader", "leader_epoch", "isr", "controller_epoch"} (broker ids)."""
        raw = self._zk_get(zkp.partition_state(topic, partition))
        return json.loads(raw) if raw else None

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        state = self.partition_state(topic, partition)
        assigned = self.assignment_ids(topic, partition)
        if state is None:
            return None
        leader = self.node_by_broker_id(int(state.get("leader", -1)))
        isr = [n for n in self._nodes_of(state.get("isr", []))]
        replicas = [n for n in self._nodes_of(assigned["replicas"] if assigned else state.get("isr", []))]
        return PartitionState(leader, isr, replicas, state.get("leader_epoch"))

    def _nodes_of(self, ids: list[int]) -> Iterator[Node]:
        for bid in ids:
            n = self.node_by_broker_id(int(bid))
            if n is not None:
                yield n

    def assignment_ids(self, topic: str, partition: int) -> dict[str, list[int]] | None:
        """The partition's entry in the topic znode: {"replicas", "adding", "removing"} (broker ids)."""
        raw = self._zk_get(zkp.topic(topic))
        if not raw:
            return None
        d = json.loads(raw)
        key = str(partition)
        if key not in d.get("partitions", {}):
            return None
        return {"replicas": d["partitions"][key], "adding": (d.get("adding_replicas") or {}).get(key, []),
                "removing": (d.get("removing_replicas") or {}).get(key, [])}

    def assignment(self, topic: str, partition: int) -> dict[str, list[str]] | None:
        ids = self.assignment_ids(topic, partition)
        if ids is None:
            return None
        return {k: [n.name for n in self._nodes_of(v)] for k, v in ids.items()}

    # --- operator requests, by the ZooKeeper admin paths of seed 003 (cluster-impl/README.md) ------
    def request_reassignment(self, topic: str, partition: int, nodes: list[Node]) -> None:
        """Ask the controller to move a partition; it finishes (and deletes the request) on its own."""
        from kazoo.exceptions import NodeExistsError

        path = zkp.admin_entry(zkp.REASSIGN, topic, partition)
        data = json.dumps({"version": 1, "replicas": [self.broker_id(n) for n in nodes]}).encode()
        zk = self._client()
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:
            zk.set(path, data)  # a move still under way is redirected, as Kafka does

    def request_preferred_election(self, topic: str, partitions: list[int]) -> bool:
        """False when an earlier request is still pending (the controller takes one at a time)."""
        from kazoo.exceptions import NodeExistsError

        body = {"version": 1, "partitions": [{"topic": topic, "partition": p} for p in partitions]}
        try:
            self._client().create(zkp.PREFERRED_ELECTION, json.dumps(body).encode(), makepath=True)
            return True
        except NodeExistsError:
            return False

    def leader(self, topic: str, partition: int) -> Node | None:
        state = self.partition_state(topic, partition)
        if not state:
            return None
        bid = int(state.get("leader", -1))
        return self.node_by_broker_id(bid) if bid > 0 else None

    def close(self) -> None:
        with self._zk_lock:
            zk, self._zk = self._zk, None
        if zk is not None:
            try:
                zk.stop()  # type: ignore[attr-defined]
                zk.close()  # type: ignore[attr-defined]
            except Exception as e:  # closing a dead session must not mask the run's real outcome
                log.debug("closing ZooKeeper client: %s", e)
