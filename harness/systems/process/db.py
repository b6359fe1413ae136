"""`ProcessDB`: a process system's deployment on nodes, composed from the shared node mechanics.

Processes are started by the file's commands and found by their pid files (`harness/db/pidfile.py`);
a disk is the image's FUSE disk (`harness/db/lazyfs.py`), the clock libfaketime's offset file
(`harness/db/faketime.py`), the network iptables (`harness/db/iptables.py`); who leads and who is in
sync is what the brokers answer to Kafka's Metadata (`harness/db/kafka_view.py`). Nothing here
knows which broker it runs: the file (`config.py`) says all of it.
"""

from __future__ import annotations

import logging
import shlex
import socket
import time
from collections.abc import Mapping
from typing import Any

from harness.db import faketime, kafka_admin, lazyfs, pidfile
from harness.db.every_node import on_every_node
from harness.db.iptables import IptablesCapability
from harness.db.kafka_reads import KafkaReads
from harness.db.kafka_view import MetadataView
from harness.db.node_locks import NodeLocks
from harness.db.offsets import leader_ends, stable_ends
from harness.systems.process.config import ProcessConfig, ProcessSystemConfig
from kernel import layout
from kernel.db import Cluster, LeaderEnd, PartitionState, recovered
from kernel.errors import ChaosError, ProvisionError, RemoteError
from kernel.node import Node
from kernel.remote import Remote
from kernel.spec import RunSpec
from kernel.system import SystemDecl, placed

log = logging.getLogger(__name__)
#: how long a started process must stay alive before its start counts (a start that exits at once)
STARTED_S = 1.0
LOG_TAIL = 12


class ProcessDB(KafkaReads, IptablesCapability):
    """Implements DB, Killable, Pausable, Net, Clock, Disk, ClusterView, Recovering, HasLogFiles,
    HasApiVersions, HasLeaderViews and HasStableEnds for a broker described by a file. Which faults a
    run may use is the declaration's business (`decl`: the roles and capabilities the file claims)."""

    def __init__(self, config: ProcessSystemConfig, decl: SystemDecl, spec: RunSpec) -> None:
        self.config = config
        self.system = decl
        self.spec = spec
        self.nodes: list[Node] = []
        self.remotes: Mapping[str, Remote] = {}
        self._restarted: set[str] = set()
        self._locks = NodeLocks()

    def attach(self, cluster: Cluster) -> ProcessDB:
        self.nodes = list(cluster.nodes)
        self.remotes = cluster.remotes
        return self

    def _r(self, node: Node) -> Remote:
        return self.remotes[node.name]

    def hosts(self, proc: ProcessConfig) -> list[Node]:
        """The nodes that run `proc` (its `nodes` placement: all, the first, or all but the first)."""
        return [n for i, n in enumerate(self.nodes) if placed(proc.nodes, i)]

    def broker_nodes(self) -> list[Node]:
        """Where brokers run: where clients connect, and what a broker fault may hit."""
        return self.hosts(self.config.broker())

    def _runs(self, node: Node, proc: ProcessConfig) -> bool:
        return placed(proc.nodes, self.nodes.index(node))

    @property
    def view(self) -> MetadataView:
        return MetadataView(self.broker_nodes(), self.config.port)

    def client_address(self, node: Node) -> str:
        return f"{node.ip}:{self.config.port}"

    def bootstrap_servers(self) -> str:
        return ",".join(self.client_address(n) for n in self.broker_nodes())

    # --- the commands' environment -------------------------------------------------------------
    def env(self, node: Node, proc: ProcessConfig | None = None) -> dict[str, str]:
        s = self.spec
        out = {"CHAOS_NODE": node.name, "CHAOS_NODE_ID": str(self.nodes.index(node) + 1), "CHAOS_NODE_IP": node.ip,
               "CHAOS_NODE_IPS": " ".join(n.ip for n in self.nodes), "CHAOS_NODE_COUNT": str(len(self.nodes)),
               "CHAOS_FAKETIME_RUN": layout.FAKETIME_RUN, "CHAOS_PARTITIONS": str(s.partitions),
               "CHAOS_REPLICATION_FACTOR": str(s.replication_factor), "CHAOS_MIN_INSYNC": str(s.min_insync),
               **self.config.env}
        if proc is not None:
            out.update(proc.env)
        return out

    def _run(self, node: Node, cmd: str, proc: ProcessConfig | None = None, *, timeout: float = 120.0,
             check: bool = True) -> Any:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env(node, proc).items())
        return self._r(node).exec(f"export {exports}; {cmd}", timeout=timeout, check=check)

    # --- DB ------------------------------------------------------------------------------------
    def setup(self, cluster: Cluster) -> None:
        """Install on every node, then each process in the file's order on every node (a metadata
        store's quorum forms before the brokers start), each waited for until it serves."""
        self.attach(cluster)
        for node in self.nodes:
            r = self._r(node)
            r.exec(f"mkdir -p /etc/chaos {layout.LOG_DIR} {layout.RUN_DIR}; {faketime.reset_cmd()}", timeout=30)
            for cmd in self.config.install:
                self._run(node, cmd, timeout=600)
        for proc in self.config.processes:
            for node in self.hosts(proc):
                if proc.data_dirs:
                    self._r(node).exec("mkdir -p " + " ".join(shlex.quote(d) for d in proc.data_dirs), timeout=30)
                if proc.disk:
                    lazyfs.mount(self._r(node), proc.disk, proc.disk.rstrip("/") + ".disk")
                for cmd in proc.configure:
                    self._run(node, cmd, proc)
                self.start_process(node, proc)
            for node in self.hosts(proc):
                self._wait_ready(node, proc)
        deadline = time.monotonic() + 90
        brokers = self.broker_nodes()
        for node in brokers:
            kafka_admin.wait_serving(self.client_address(node), self.expected_brokers(), deadline,
                                     f"the broker's logs on {node.name}", controller=False)

    def teardown(self, cluster: Cluster) -> None:
        self.attach(cluster)
        on_every_node(self.nodes, self._teardown_node, "teardown")

    def _teardown_node(self, node: Node) -> None:
        """Each process stopped in reverse order (its `stop` first, when the file gives one, then a
        SIGKILL of whatever its pid file still names), its disk unmounted, its data and the clock reset."""
        for proc in reversed(self.config.processes):
            if not self._runs(node, proc):
                continue
            if proc.stop:
                self._run(node, proc.stop, proc, timeout=60, check=False)
            self._r(node).exec(pidfile.kill_cmd(proc.pid_file), timeout=30)
            if proc.disk:
                lazyfs.unmount(self._r(node), proc.disk)
        dirs = [d for p in self.config.processes if self._runs(node, p)
                for d in (*p.data_dirs, *((p.disk, p.disk.rstrip("/") + ".disk") if p.disk else ()))]
        wipe = f"rm -rf {' '.join(shlex.quote(d) for d in dirs)}; " if dirs else ""
        self._r(node).exec(f"{wipe}{faketime.reset_cmd()}", timeout=30)

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        kafka_admin.create_topic(self.bootstrap_servers(), self.expected_brokers(), topic, partitions,
                                 replication_factor,
                                 lambda p: self.leader(topic, p) is not None)

    def expected_brokers(self) -> int:
        """How many brokers Metadata lists once the cluster serves: `brokers_listed` when the file
        gives it (a broker that lists only itself says 1), else one per broker node."""
        return self.config.brokers_listed or len(self.broker_nodes())

    def recovered(self, topic: str, partitions: int, replication_factor: int) -> bool:
        """Kafka's recovery predicate, with the ISR no fuller than the brokers listed can make it: a
        broker that names only itself has no other replica to count in sync, whatever replication
        factor the topic was created with."""
        return recovered(self, topic, partitions, min(replication_factor, self.expected_brokers()))

    def close(self) -> None:
        return None

    def deployed(self, node: Node) -> bool:
        """Whether the broker ran on `node` (its pid file exists): `chaos heal` restarts only those."""
        return self._r(node).exec(f"test -f {shlex.quote(self.config.broker().pid_file)}", check=False).ok

    # --- processes -----------------------------------------------------------------------------
    def _proc(self, name: str) -> ProcessConfig:
        for p in self.config.processes:
            if p.name == name:
                return p
        raise ValueError(f"system {self.config.name} has no process {name!r}")

    def pid(self, node: Node, name: str) -> int | None:
        res = self._r(node).exec(pidfile.alive_cmd(self._proc(name).pid_file), check=False, timeout=15)
        return pidfile.parse_pid(res.stdout, res.ok)

    def start_process(self, node: Node, proc: ProcessConfig, *, confirm: bool = True) -> None:
        """Run `start` unless the process runs (one fault at a time per node: `harness/db/node_locks.py`).
        A start command that fails, or (with `confirm`, at deployment) whose process is gone a second
        later, is one sentence with the last lines of its logs (exit 5). A restart by a fault is not
        confirmed that way: an overlapping fault may kill it again at once, and the recovery wait is
        what says whether it came back."""
        with self._locks.of(node):
            if self.pid(node, proc.name) is not None:
                return
            res = self._run(node, f"rm -f {shlex.quote(proc.pid_file)}; {proc.start}", proc, timeout=60,
                            check=False)
            if res.ok and not confirm:
                return
            if res.ok:
                time.sleep(STARTED_S)
                if self.pid(node, proc.name) is not None:
                    return
                why = f"its process is not running {STARTED_S:g} s later (pid file {proc.pid_file})"
            else:
                why = f"the start command exited {res.exit_status}"
        tail = self._tail(node, proc, res.stderr or res.stdout or "")
        raise RemoteError(node.name, f"{proc.name} did not start: {why}; {tail}")

    def _tail(self, node: Node, proc: ProcessConfig, output: str = "") -> str:
        """The last lines of the process's first log that has any, else of `output` (its start's)."""
        out = output.strip().splitlines()[-LOG_TAIL:]
        for path in proc.log_files:
            got = self._r(node).exec(f"tail -n {LOG_TAIL} {shlex.quote(path)}", check=False, timeout=15)
            if got.ok and got.stdout.strip():
                out = got.stdout.strip().splitlines()[-LOG_TAIL:]
                return f"last lines of {path}: " + " | ".join(out)
        return "its output: " + (" | ".join(out) if out else "(none)")

    def _wait_ready(self, node: Node, proc: ProcessConfig) -> None:
        deadline = time.monotonic() + proc.start_timeout_s
        seen = "not tried"
        while True:
            if self.pid(node, proc.name) is None:
                raise RemoteError(node.name, f"{proc.name} stopped while starting; "
                                             f"{self._tail(node, proc)}")
            if proc.ports:
                try:
                    with socket.create_connection((node.ip, proc.ports[0]), timeout=2):
                        seen = "port open"
                except OSError as e:
                    seen = f"port {proc.ports[0]}: {e}"
            if seen == "port open" or not proc.ports:
                if proc.ready is None or self._run(node, proc.ready, proc, timeout=30, check=False).ok:
                    self._check_pid_serves(node, proc)
                    return
                seen = f"`{proc.ready}` failed"
            if time.monotonic() > deadline:
                raise ProvisionError(f"{proc.name} on {node.name} did not serve within {proc.start_timeout_s} s "
                                     f"({seen}); {self._tail(node, proc)}")
            time.sleep(0.3)

    def _listeners(self, node: Node, port: int) -> set[int]:
        return pidfile.parse_pids(self._r(node).exec(pidfile.listeners_cmd(port), timeout=15).stdout)

    def _check_pid_serves(self, node: Node, proc: ProcessConfig) -> None:
        """The pid file names the process that serves its first port, else every kill and pause would
        hit another process and the fault would not happen (a `start` of `cd DIR && cmd &` writes the
        pid of a subshell): one sentence at deployment, exit 5."""
        if not proc.ports:
            return
        pid = self.pid(node, proc.name)
        serving = self._listeners(node, proc.ports[0])
        if pid is not None and serving and pid not in serving:
            raise RemoteError(node.name, f"{proc.name}'s pid file {proc.pid_file} names pid {pid}, but port "
                                         f"{proc.ports[0]} is served by pid {', '.join(map(str, sorted(serving)))}: "
                                         "`start` must write the pid of the process itself (put one simple command "
                                         "in the background and write $!), or kills and pauses would miss it")

    def _check_killed(self, node: Node, proc: ProcessConfig) -> None:
        """After a kill, nothing serves the process's first port any more (a deadline of 5 s, for the
        kernel to release it); else the fault did not happen, and the run must not go on as if it had."""
        if not proc.ports:
            return
        deadline = time.monotonic() + 5
        while serving := self._listeners(node, proc.ports[0]):
            if time.monotonic() > deadline:
                raise RemoteError(node.name, f"killed {proc.name} (pid file {proc.pid_file}), but port "
                                             f"{proc.ports[0]} is still served by pid "
                                             f"{', '.join(map(str, sorted(serving)))}: the kill missed it")
            time.sleep(0.1)

    def start(self, node: Node) -> None:
        """Killable: start the broker on `node` if it is not running (and wait until it serves)."""
        proc = self.config.broker()
        if not self._runs(node, proc):
            return  # a node that runs no broker has none to start again
        with self._locks.of(node):
            if self.pid(node, proc.name) is not None:
                return
            self._restarted.add(node.name)
            self.start_process(node, proc, confirm=False)

    def kill(self, node: Node) -> None:
        proc = self.config.broker()
        with self._locks.of(node):
            self._r(node).exec(pidfile.kill_cmd(proc.pid_file), timeout=30)
            if self._runs(node, proc):
                self._check_killed(node, proc)

    def pause(self, node: Node, *, process: str = "broker") -> None:
        self._r(node).exec(pidfile.signal_cmd(self._proc(process).pid_file, "STOP"), timeout=15)

    def resume(self, node: Node, *, process: str = "broker") -> None:
        self._r(node).exec(pidfile.signal_cmd(self._proc(process).pid_file, "CONT"), timeout=15)

    # --- Disk and Clock (Net: `IptablesCapability`) ---------------------------------------------
    def _disk(self) -> str:
        disk = self.config.broker().disk
        if disk is None:
            raise ChaosError(f"system {self.config.name}'s broker has no disk (the file names none)")
        return disk

    def crash(self, node: Node, *, lose_unfsynced: bool) -> dict[str, Any]:
        if lose_unfsynced:
            self._disk()  # a broker without a disk is refused before it is killed
        self.kill(node)
        return lazyfs.lose_unfsynced(self._r(node)) if lose_unfsynced else {}

    def wipe(self, node: Node) -> None:
        lazyfs.wipe(self._r(node), self._disk())

    def set_clock(self, node: Node, seconds: float) -> None:
        faketime.set_clock(self._r(node), seconds)

    # --- ClusterView and recovery, over Kafka's Metadata ----------------------------------------
    def controller(self) -> Node | None:
        return self.view.controller()

    def controller_epoch(self) -> int | None:
        return None

    def leader(self, topic: str, partition: int) -> Node | None:
        return self.view.leader(topic, partition)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.view.partition(topic, partition)

    def restarts_registered(self) -> bool:
        """Every broker started again since its kill is listed in the cluster's Metadata again."""
        if not self._restarted:
            return True
        listed = self.view.registered()
        if listed is None:
            return False
        self._restarted -= listed
        return not self._restarted

    def leader_ends(self, topic: str, partitions: int) -> dict[int, LeaderEnd]:
        """HW and log end from each leader (ListOffsets; a broker that refuses a replica's ListOffsets
        gives its HW as both ends: its log end is not to be had over the protocol)."""
        view = self.view
        md = view.answer(topic)  # one Metadata answer names every leader, its broker id and its epoch
        if md is None:
            return {}
        by_leader: dict[int, list[int]] = {}
        for p, (leader, _, _, _) in md.partitions.items():
            if p < partitions and leader >= 0:
                by_leader.setdefault(leader, []).append(p)
        out: dict[int, LeaderEnd] = {}
        for bid, keys in by_leader.items():
            node = view.node_of(bid, md.brokers)
            if node is None:
                continue
            got = leader_ends(self.client_address(node), bid, topic, keys)
            if missing := [k for k in keys if k not in got]:
                hw = stable_ends(self.client_address(node), topic, missing)
                got.update({k: LeaderEnd(e.hw, e.hw, md.partitions[k][1]) for k, e in hw.items()
                            if md.partitions[k][1] >= 0})
            out.update(got)
        return out

    # --- files ---------------------------------------------------------------------------------
    def logs(self, node: Node) -> dict[str, bytes]:
        paths = [f for p in self.config.processes if self._runs(node, p) for f in p.log_files]
        if any(p.disk for p in self.config.processes if self._runs(node, p)):
            paths.append(layout.LAZYFS_LOG)
        out = {}
        for path in paths:
            try:
                out[path.rsplit("/", 1)[-1]] = self._r(node).get(path)
            except ChaosError as e:
                log.warning("%s: could not copy %s: %s", node.name, path, e)
        return out
