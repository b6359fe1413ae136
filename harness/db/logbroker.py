"""`LogbrokerDB`: our system under test deployed on nodes — a ZooKeeper ensemble and one broker per node.

It acts on nodes only through `Remote` (so docker nodes and real machines are driven the same way)
and reads cluster metadata (who is controller, who leads a partition) from ZooKeeper with kazoo from
the control host, for targeted faults. Broker ids follow node order: n1 is broker 1.

Processes are found by the pid files of `harness.layout`; every operation is idempotent, because
nemeses and teardown may repeat them on any exit path.
"""

from __future__ import annotations

import json
import logging
import shlex
import socket
import threading
import time
from collections.abc import Mapping

from harness import layout
from harness.db import zookeeper
from harness.db.settings import BrokerSettings
from harness.errors import ProvisionError, RemoteError
from harness.node import Node
from harness.remote import Remote

log = logging.getLogger(__name__)

PROCESSES = ("broker", "zookeeper")


def broker_id(nodes: list[Node], node: Node) -> int:
    return [n.name for n in nodes].index(node.name) + 1


def broker_properties(nodes: list[Node], node: Node, settings: BrokerSettings) -> str:
    """The broker's config file: Kafka's key names, so operators read it without a glossary."""
    zk = ",".join(f"{n.ip}:{layout.ZK_CLIENT_PORT}" for n in nodes)
    props: dict[str, str] = {
        "broker.id": str(broker_id(nodes, node)),
        "listeners": f"PLAINTEXT://0.0.0.0:{layout.BROKER_PORT}",
        "advertised.host": node.ip,
        "log.dirs": layout.BROKER_DATA,
        "num.partitions": str(settings.partitions),
        "default.replication.factor": str(min(settings.replication_factor, len(nodes))),
        "min.insync.replicas": str(settings.min_insync_replicas),
        "unclean.leader.election.enable": str(settings.unclean_leader_election).lower(),
        "zookeeper.connect": zk,
        "zookeeper.session.timeout.ms": str(settings.session_timeout_ms),
        "replica.lag.time.max.ms": str(settings.replica_lag_time_max_ms),
        "auto.create.topics.enable": "false",
    }
    if settings.flush_messages is not None:
        props["flush.messages"] = str(settings.flush_messages)
    props.update(settings.extra)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _pid_alive_cmd(pidfile: str) -> str:
    return f"[ -f {pidfile} ] && kill -0 $(cat {pidfile}) 2>/dev/null && cat {pidfile}"


class LogbrokerDB:
    """Implements DB, Killable, Pausable, HasLogFiles, HasReplicaDumps and ClusterView."""

    def __init__(self, nodes: list[Node], remotes: Mapping[str, Remote], settings: BrokerSettings) -> None:
        self.nodes = list(nodes)
        self.remotes = remotes
        self.settings = settings
        self._zk_lock = threading.Lock()
        self._zk: object | None = None  # a kazoo.client.KazooClient, created lazily

    # --- helpers -------------------------------------------------------------------------------
    def _r(self, node: Node) -> Remote:
        return self.remotes[node.name]

    def node_by_broker_id(self, bid: int) -> Node | None:
        return self.nodes[bid - 1] if 1 <= bid <= len(self.nodes) else None

    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.ip}:{layout.BROKER_PORT}" for n in self.nodes)

    def zk_connect(self) -> str:
        return ",".join(f"{n.ip}:{layout.ZK_CLIENT_PORT}" for n in self.nodes)

    # --- DB ------------------------------------------------------------------------------------
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
            self._wait_port(node, layout.BROKER_PORT, deadline)
        self._wait_brokers_registered(deadline)

    def teardown_all(self) -> None:
        self.close()
        errors = []
        for node in self.nodes:
            try:
                self.teardown(node)
            except RemoteError as e:  # keep tearing down the others; report after
                errors.append(str(e))
        if errors:
            raise RemoteError("cluster", "teardown failed on some nodes: " + "; ".join(errors))

    def setup(self, node: Node) -> None:
        self._install_configs(node)
        self.start_zookeeper(node)
        self.start(node)

    def teardown(self, node: Node) -> None:
        for process in PROCESSES:
            self.resume(node, process=process)
        self.kill(node)
        self.kill_zookeeper(node)
        self._r(node).exec(
            f"rm -rf {layout.BROKER_DATA} {layout.ZK_DATA} /dev/shm/faketime_shm_* ; "
            f"echo +0 > {layout.FAKETIME_FILE}",
            timeout=30,
        )

    def _install_configs(self, node: Node) -> None:
        r = self._r(node)
        r.exec(f"mkdir -p /etc/chaos {layout.LOG_DIR} {layout.RUN_DIR} {layout.BROKER_DATA} {layout.ZK_DATA}")
        r.put(layout.ZK_CONFIG, zookeeper.zoo_cfg(self.nodes).encode())
        r.put(f"{layout.ZK_DATA}/myid", f"{zookeeper.myid(self.nodes, node)}\n".encode())
        r.put(layout.BROKER_CONFIG, broker_properties(self.nodes, node, self.settings).encode())
        r.exec(f"[ -f {layout.FAKETIME_FILE} ] || echo +0 > {layout.FAKETIME_FILE}")

    # --- processes -----------------------------------------------------------------------------
    def _pidfile(self, process: str) -> str:
        if process not in PROCESSES:
            raise ValueError(f"unknown process {process!r}; expected one of {PROCESSES}")
        return layout.BROKER_PIDFILE if process == "broker" else layout.ZK_PIDFILE

    def pid(self, node: Node, process: str = "broker") -> int | None:
        res = self._r(node).exec(_pid_alive_cmd(self._pidfile(process)), check=False, timeout=15)
        out = res.stdout.strip()
        return int(out) if res.ok and out.isdigit() else None

    def broker_pid(self, node: Node) -> int | None:
        return self.pid(node, "broker")

    def zookeeper_pid(self, node: Node) -> int | None:
        return self.pid(node, "zookeeper")

    def start(self, node: Node) -> None:
        """Start the broker under libfaketime (START_BROKER in the image) unless it already runs."""
        if self.broker_pid(node) is not None:
            return
        bugs = " ".join(f"--bug {shlex.quote(b)}" for b in self.settings.bugs)
        self._r(node).exec(f"rm -f {layout.BROKER_PIDFILE}; {layout.START_BROKER} {bugs}", timeout=30)

    def kill(self, node: Node) -> None:
        self._kill(node, "broker")

    def start_zookeeper(self, node: Node) -> None:
        self._r(node).exec(zookeeper.start_command(), timeout=30)

    def kill_zookeeper(self, node: Node) -> None:
        self._kill(node, "zookeeper")

    def _kill(self, node: Node, process: str) -> None:
        """SIGKILL (after SIGCONT, so a paused process dies too), wait until it is gone, drop its pid file.

        libfaketime leaves /dev/shm/faketime_shm_* behind when its process is killed; remove the ones
        whose owner is dead.
        """
        pidfile = self._pidfile(process)
        self._r(node).exec(
            f"if [ -f {pidfile} ]; then p=$(cat {pidfile}); kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; "
            f"for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; rm -f {pidfile}; fi; "
            "for f in /dev/shm/faketime_shm_*; do [ -e \"$f\" ] || continue; "
            "p=${f##*_}; kill -0 \"$p\" 2>/dev/null || rm -f \"$f\"; done; true",
            timeout=30,
        )

    def pause(self, node: Node, *, process: str = "broker") -> None:
        self._signal(node, process, "STOP")

    def resume(self, node: Node, *, process: str = "broker") -> None:
        self._signal(node, process, "CONT")

    def _signal(self, node: Node, process: str, sig: str) -> None:
        pidfile = self._pidfile(process)
        self._r(node).exec(f"[ -f {pidfile} ] && kill -{sig} $(cat {pidfile}) 2>/dev/null; true", timeout=15)

    # --- files ---------------------------------------------------------------------------------
    def log_files(self, node: Node) -> list[str]:
        return [layout.BROKER_LOG, layout.ZK_LOG, layout.BROKER_CONFIG, layout.ZK_CONFIG]

    def dump_replicas(self, node: Node) -> dict[str, bytes]:
        """Run the broker's dump tool on the node and fetch its JSON Lines files."""
        r = self._r(node)
        out = "/tmp/chaos-replica-dump"
        r.exec(
            f"rm -rf {out} && mkdir -p {out} && {layout.DUMP_REPLICAS} --log-dirs {layout.BROKER_DATA} --out {out}",
            timeout=120,
        )
        names = r.exec(f"ls {out}", timeout=15).stdout.split()
        return {name: r.get(f"{out}/{name}") for name in names if name.endswith(".jsonl")}

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
                    f"see {layout.ZK_LOG} on that node"
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
                        f"see {layout.BROKER_LOG} on that node"
                    ) from None
                time.sleep(0.3)

    def _wait_brokers_registered(self, deadline: float) -> None:
        want = {str(broker_id(self.nodes, n)) for n in self.nodes}
        while True:
            ids = set(self._zk_children("/brokers/ids") or [])
            if want <= ids:
                return
            if time.monotonic() > deadline:
                raise ProvisionError(
                    f"brokers {sorted(want - ids)} did not register in ZooKeeper (/brokers/ids has {sorted(ids)})"
                )
            time.sleep(0.3)

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
            log.warning("ZooKeeper read of %s failed: %s", path, e)
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
        raw = self._zk_get("/controller")
        if not raw:
            return None
        d = json.loads(raw)
        bid = d.get("brokerid", d.get("broker_id"))
        return self.node_by_broker_id(int(bid)) if bid is not None else None

    def controller_epoch(self) -> int | None:
        raw = self._zk_get("/controller_epoch")
        return int(raw.decode().strip()) if raw else None

    def partition_state(self, topic: str, partition: int) -> dict | None:  # type: ignore[type-arg]
        raw = self._zk_get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(raw) if raw else None

    def assignment(self, topic: str, partition: int) -> dict | None:  # type: ignore[type-arg]
        """The partition's entry in the topic znode: {"replicas", "adding", "removing"} (broker ids)."""
        raw = self._zk_get(f"/brokers/topics/{topic}")
        if not raw:
            return None
        d = json.loads(raw)
        key = str(partition)
        if key not in d.get("partitions", {}):
            return None
        return {"replicas": d["partitions"][key], "adding": (d.get("adding_replicas") or {}).get(key, []),
                "removing": (d.get("removing_replicas") or {}).get(key, [])}

    # --- operator requests, by the ZooKeeper admin paths of seed 003 (cluster-impl/README.md) ------
    def request_reassignment(self, topic: str, partition: int, replicas: list[int]) -> None:
        """Ask the controller to move a partition; it finishes (and deletes the request) on its own."""
        from kazoo.exceptions import NodeExistsError

        path = f"/admin/partitions_reassigned/{topic}/{partition}"
        data = json.dumps({"version": 1, "replicas": replicas}).encode()
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
            self._client().create("/admin/preferred_replica_election", json.dumps(body).encode(), makepath=True)
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
