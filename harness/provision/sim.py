"""The simulator backend: `logsim` behind the same seams as the containers — the one module of the
harness that imports it (tests/foundation/test_layers.py keeps it so).

The production broker code runs on simulated nodes (`logsim.cluster.SimCluster`), and a run goes
through the very phases, worker pool, nemesis runner, fault families and client op logic a container
run does (`harness/run.py`). What differs is only below the seams, here:
- `SimRuntime` (`kernel.runtime.Runtime`): every activity is a task on the simulator's seeded loop,
  time is virtual and moves only while the orchestrator lets it;
- `SimProvisioner`: nodes that exist only inside the simulator;
- `SimDB`: the DB and every capability the nemesis acts through — Killable, Pausable, ClusterView,
  Admin, Net, Clock, Disk — over the simulator's models, plus replica dumps, node logs and what the
  recovery predicate reads;
- `SimKafka` (`workloads.kafka.KafkaConnection`): the queue client's Kafka calls, played by
  `logsim.client.SimKafkaClient` with a Kafka client's semantics, and in subscribe mode by
  `logsim.group.SimGroupConsumer`, which speaks the group protocol to the production coordinator.
Nothing in a simulated run reads a wall clock or waits for a thread, so a seed gives one history,
byte for byte, and `chaos replay` reproduces it. Every random stream comes from `kernel.rng`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any, TypeVar

from logsim.admin import SimAdmin
from logsim.client import SimKafkaClient
from logsim.cluster import SimCluster
from logsim.cluster import probe_registry as probe_registry  # the harness's one way to the simulator's probes
from logsim.group import SimGroupConsumer
from logsim.txn_client import SimTxnProducer

from harness.systems.logbroker import layout as bl
from harness.systems.logbroker.decl import DECL
from harness.systems.logbroker.settings import LAG_KEY, SESSION_KEY, settings_for
from kernel.capabilities import Cut
from kernel.db import OPEN_TXN_STATES, Cluster, LeaderEnd, LeaderView, PartitionState, StableEnd, recovered
from kernel.node import Node, node_names
from kernel.rng import rng as seeded
from kernel.spec import RunSpec
from kernel.workload import ClientContext
from workloads.registry import get_workload

T = TypeVar("T")
SETTLE_S = 5.0  # brokers register and elect a controller before the topic is made
TOPIC_TIMEOUT_S = 60.0
FETCH_COMMITTED_TIMEOUT_S = 2.0  # as the container client's: an OffsetFetch that takes longer is left out
ZK_PORTS = {bl.ZK_CLIENT_PORT, bl.ZK_PEER_PORT, bl.ZK_ELECTION_PORT}


def broker_settings(spec: RunSpec) -> dict[str, str]:
    """What `harness.systems.logbroker.db.broker_properties` gives a container broker, from the same
    settings record (`settings_for`: `flush.messages=1`, since acks=all promises durability only if
    every acknowledged record is on disk; the session and lag timeouts the fault plan outlasts)."""
    s = settings_for(spec)
    out = {"min.insync.replicas": str(s.min_insync_replicas), "num.partitions": str(s.partitions),
           "default.replication.factor": str(min(s.replication_factor, spec.nodes)),
           "offsets.topic.replication.factor": str(min(3, spec.nodes)), "flush.messages": str(s.flush_messages),
           **dict(s.extra)}
    if SESSION_KEY in spec.extra or LAG_KEY in spec.extra:  # else the simulator's defaults, which are the same
        out.update({SESSION_KEY: str(s.session_timeout_ms), LAG_KEY: str(s.replica_lag_time_max_ms)})
    return out


class SimProvisioner:
    """Nodes that exist only inside the simulator: nothing to bring up or tear down."""

    kind = "sim"

    def __init__(self, cluster: str = "chaos") -> None:
        self.cluster = cluster

    def up(self, n: int) -> list[Node]:
        return [Node(name, name, name) for name in node_names(n)]

    def down(self) -> None:
        return None

    def leftovers(self) -> int:
        return 0

    def connect(self, nodes: list[Node]) -> Cluster:
        return Cluster(nodes, {})

    def facts(self) -> dict[str, object]:
        return {"provisioner": "sim"}


class SimDB:
    """The simulated cluster, made at `setup` and gone at `teardown` (see the module docstring)."""

    system = DECL

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.c: SimCluster | None = None
        self.admin: SimAdmin | None = None
        self.nodes: list[Node] = []
        self.runtime = SimRuntime(self)
        self._restarting: dict[int, int | None] = {}  # broker id -> registration czxid when restarted

    @property
    def sim(self) -> SimCluster:
        if self.c is None:
            raise RuntimeError("the simulated cluster is not set up")
        return self.c

    def _node(self, name: str | None) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)

    # --- DB --------------------------------------------------------------------------------------
    def setup(self, cluster: Cluster) -> None:
        spec = self.spec
        self.nodes = list(cluster.nodes)
        self.c = SimCluster(spec.seed, spec.nodes, settings=broker_settings(spec), bugs=tuple(spec.bugs),
                            streams=lambda *path: seeded(spec.seed, "sim", *path)).__enter__()
        self.admin = SimAdmin(self.c.zk)
        self.c.start()
        self.runtime.pass_time(SETTLE_S)

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        self.sim.create_topic(topic, partitions, replication_factor)
        deadline = self.runtime.now() + TOPIC_TIMEOUT_S
        while not self.recovered(topic, partitions, replication_factor) and self.runtime.now() < deadline:
            self.runtime.pass_time(0.5)

    def teardown(self, cluster: Cluster) -> None:
        if self.c is not None:
            self.c.close()

    def close(self) -> None:
        return None

    def client_address(self, node: Node) -> str:
        return f"{node.name}:{bl.BROKER_PORT}"

    def recovered(self, topic: str, partitions: int, replication_factor: int) -> bool:
        return recovered(self, topic, partitions, replication_factor)

    def restarts_registered(self) -> bool:
        for bid, old in list(self._restarting.items()):
            now = self.sim.registration(bid)
            if now is None or now == old or self.sim.lost_data_pending(bid):
                return False
            del self._restarting[bid]
        return True

    def leader_ends(self, topic: str, partitions: int) -> dict[int, LeaderEnd]:
        out = {}
        for p in range(partitions):
            got = self.sim.leader_end(topic, p)
            if got is not None:
                out[p] = LeaderEnd(*got)
        return out

    def stable_ends(self, topic: str, partitions: int) -> dict[int, StableEnd]:
        """Each partition's LSO and HW as its simulated leader holds them."""
        out = {}
        for p in range(partitions):
            got = self.sim.stable_end(topic, p)
            if got is not None:
                out[p] = StableEnd(*got)
        return out

    def open_transactions(self) -> dict[str, str]:
        """Every live simulated broker's ListTransactions answer, from its coordinator's own handler."""
        req = SimpleNamespace(state_filters=list(OPEN_TXN_STATES), producer_id_filters=[])
        out: dict[str, str] = {}
        for n in self.sim.nodes.values():
            if n.core is None or n.paused:
                continue
            body = n.core.txn.list_transactions(0, req).body
            assert body is not None
            out.update({str(t["transactional_id"]): str(t["transaction_state"]) for t in body["transaction_states"]})
        return out

    def leader_views(self, topic: str) -> dict[str, dict[int, LeaderView] | str]:
        """Each simulated broker's metadata cache, as its Metadata answer would give it."""
        out: dict[str, dict[int, LeaderView] | str] = {}
        for name, n in self.sim.nodes.items():
            if n.core is None or n.paused:
                out[name] = "no answer (down or paused)"
                continue
            parts = n.core.metadata.topics.get(topic, {})
            out[name] = {p: LeaderView(m.leader, m.leader_epoch) for p, m in sorted(parts.items())}
        return out

    # --- Killable, Pausable, Disk ----------------------------------------------------------------
    def kill(self, node: Node) -> None:
        self.sim.nodes[node.name].kill()

    def start(self, node: Node) -> None:
        n = self.sim.nodes[node.name]
        if not n.running:
            self._restarting[n.broker_id] = self.sim.registration(n.broker_id)
            n.start()

    def pause(self, node: Node, *, process: str = "broker") -> None:
        if process == "zookeeper":
            self.sim.zk.paused_servers.add(node.name)
        else:
            self.sim.nodes[node.name].pause()

    def resume(self, node: Node, *, process: str = "broker") -> None:
        if process == "zookeeper":
            self.sim.zk.paused_servers.discard(node.name)
        else:
            self.sim.nodes[node.name].resume()

    def crash(self, node: Node, *, lose_unfsynced: bool) -> dict[str, Any]:
        if lose_unfsynced:
            return dict(self.sim.power_loss(node.name))
        self.kill(node)
        return {}

    def wipe(self, node: Node) -> None:
        self.sim.wipe(node.name)

    # --- Net: grudges in the network model; ZooKeeper's ports are the cluster's ZooKeeper cuts -----
    def _scoped(self, cut: Cut) -> str | None:
        """The network model's scope for a cut on broker ports; None for one on ZooKeeper's."""
        if set(cut.ports) & ZK_PORTS:
            return None
        if cut.hold:
            return "hold"
        return "from-port" if cut.from_ports else "to-port" if cut.ports else "all"

    def drop(self, cut: Cut) -> None:
        self._cut(cut, True)

    def lift(self, cut: Cut) -> None:
        self._cut(cut, False)

    def _cut(self, cut: Cut, on: bool) -> None:
        scope = self._scoped(cut)
        if scope is None:
            (self.sim.cut_zk if on else self.sim.uncut_zk)(cut.grudge)
        else:
            grudge = {k: list(v) for k, v in cut.grudge.items()}
            (self.sim.net.add_grudge if on else self.sim.net.lift_grudge)(grudge, cut.loss, scope=scope)

    def heal_net(self) -> None:
        self.sim.net.heal()
        self.sim.zk_drops.clear()

    # --- Clock -----------------------------------------------------------------------------------
    def set_clock(self, node: Node, seconds: float) -> None:
        self.sim.nodes[node.name].clock.skew_ms = int(seconds * 1000)

    # --- ClusterView and Admin -------------------------------------------------------------------
    def controller(self) -> Node | None:
        return self._node(self.sim.controller())

    def controller_epoch(self) -> int | None:
        return self.sim.controller_epoch()

    def leader(self, topic: str, partition: int) -> Node | None:
        return self._node(self.sim.leader(topic, partition))

    def _nodes_of(self, ids: list[int]) -> list[Node]:
        return [n for n in (self._node(self.sim.node_of(int(b))) for b in ids) if n is not None]

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        st = self.sim.partition_state(topic, partition)
        if st is None:
            return None
        leader = self._node(self.sim.node_of(int(st["leader"])))
        return PartitionState(leader, self._nodes_of(st["isr"]), self._nodes_of(st["replicas"] or st["isr"]),
                              st.get("leader_epoch"))

    def request_reassignment(self, topic: str, partition: int, nodes: list[Node]) -> None:
        assert self.admin is not None
        self.admin.request_reassignment(topic, partition, [self.sim.nodes[n.name].broker_id for n in nodes])

    def request_preferred_election(self, topic: str, partitions: list[int]) -> bool:
        assert self.admin is not None
        return self.admin.request_preferred_election(topic, partitions)

    def assignment(self, topic: str, partition: int) -> dict[str, list[str]] | None:
        assert self.admin is not None
        ids = self.admin.assignment_ids(topic, partition)
        if ids is None:
            return None
        return {k: [n.name for n in self._nodes_of(v)] for k, v in ids.items()}

    # --- what the collect phase keeps ------------------------------------------------------------
    def dump_replicas(self, node: Node) -> dict[str, bytes]:
        return self.sim.dump_replicas(node.name)

    def logs(self, node: Node) -> dict[str, bytes]:
        return {"broker.log": ("\n".join(self.sim.nodes[node.name].log_lines) + "\n").encode()}

    # --- the client's way in ---------------------------------------------------------------------
    def connect(self, ctx: ClientContext, node: Node) -> SimKafka:
        spec = ctx.spec
        txn = get_workload(spec.workload).transactional
        client = SimKafkaClient(self.sim.net, self.sim.names, node.name, spec.topic,
                                seeded(spec.seed, "sim", "client", ctx.process),
                                acks=-1 if spec.acks == "all" else int(spec.acks), idempotent=spec.idempotence,
                                read_committed=txn is not None)
        if txn is None:
            return SimKafka(client, spec.partitions)
        # half the processes end transactions as KIP-890 part 2 clients (EndTxn v5 bumps the epoch),
        # half as librdkafka does today (EndTxn v1): the switch `no-txn-verification` matters to both
        producer = SimTxnProducer(self.sim.net, self.sim.names, spec.topic,
                                  seeded(spec.seed, "sim", "txn-client", ctx.process),
                                  txn.id_of(spec, ctx.process), timeout_ms=txn.timeout_ms,
                                  produce_timeout_s=txn.produce_timeout_ms / 1000,
                                  end_version=5 if ctx.process % 2 == 0 else 1)
        return SimTxnKafka(client, spec.partitions, producer, txn.timeout_ms / 1000)


class SimActivity:
    def __init__(self, name: str, task: asyncio.Task[Any]) -> None:
        self.name, self.task = name, task

    def done(self) -> bool:
        return self.task.done()

    def cancel(self) -> None:
        self.task.cancel()


class SimRuntime:
    """`kernel.runtime.Runtime` on the simulator's loop (virtual time; nothing runs unless asked)."""

    def __init__(self, db: SimDB) -> None:
        self.db = db

    def now(self) -> float:
        return self.db.c.loop.time() if self.db.c is not None else 0.0

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> SimActivity:
        return SimActivity(name, self.db.sim.loop.spawn(None, coro, name=name))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self.db.sim.loop
        return loop.run_until_complete(loop.spawn(None, coro))

    def pass_time(self, seconds: float) -> None:
        loop = self.db.sim.loop
        loop.advance_to(loop.time() + max(0.0, seconds))

    def join(self, activities: list[Any], timeout_s: float) -> None:
        """Run the loop until every activity is done or `timeout_s` simulated seconds passed. Inside
        the loop (a fault waiting for its own helper) nothing else runs meanwhile: nothing to wait for."""
        loop = self.db.sim.loop
        pending = [a.task for a in activities if not a.done()]
        if pending and not loop.is_running():
            loop.run_until_complete(asyncio.wait(pending, timeout=timeout_s))

    def facts(self) -> dict[str, Any]:
        if self.db.c is None:
            return {}
        loop = self.db.c.loop
        return {"sim_seconds": round(loop.time(), 3), "sim_loop_errors": list(loop.errors[:20])}


class SimKafka:
    """`workloads.kafka.KafkaConnection` over the simulated client: assign mode through
    `logsim.client.SimKafkaClient`, subscribe mode through `logsim.group.SimGroupConsumer` (the
    group protocol, against the production group coordinator)."""

    def __init__(self, client: SimKafkaClient, partitions: int) -> None:
        self.k = client
        self.partitions = partitions
        self.group: SimGroupConsumer | None = None

    async def send_many(self, sends: list[tuple[int, int]]) -> list[tuple[str, Any, str | None]]:
        return await self.k.send_many(sends)

    def assign(self, keys: list[int]) -> None:
        self.k.assign(keys)

    async def poll(self, timeout_s: float) -> dict[str, list[list[int]]]:
        if self.group is not None:
            await self.group.rejoin_if_asked()
        return await self.k.poll(timeout_s)

    async def watermarks(self, keys: list[int]) -> dict[int, int]:
        return await self.k.high_watermarks(keys)

    async def subscribe(self, group: str) -> list[dict[str, list[int]]]:
        gone = await self.group.leave() if self.group is not None else []
        self.k.assign([])
        self.group = SimGroupConsumer(self.k, group, self.partitions)
        return gone

    def take_rebalances(self) -> list[dict[str, list[int]]]:
        if self.group is None:
            return []
        got, self.group.rebalances = self.group.rebalances, []
        return got

    async def fetch_committed(self) -> dict[str, Any]:
        if self.group is None or not self.group.assigned:
            return {}
        got = await self.group.committed(self.group.assigned, timeout=FETCH_COMMITTED_TIMEOUT_S)
        return {"fetched-commits": {str(k): o for k, o in sorted(got.items())}} if got else {}

    async def commit(self, read: dict[str, list[list[int]]]) -> dict[str, Any]:
        if self.group is None:
            return {}
        nxt = {int(k): pairs[-1][0] + 1 for k, pairs in read.items() if pairs and int(k) in self.group.assigned}
        if not nxt:
            return {}
        acked, error = await self.group.commit(nxt)
        out: dict[str, Any] = {"commits": {str(k): o for k, o in sorted(acked.items())}} if acked or not error else {}
        return out | ({"commit-error": error} if error else {})

    def close(self) -> None:
        """A member leaves its group on the way out (LeaveGroup, not awaited: a closing client does not
        wait for the coordinator's answer)."""
        if self.group is not None:
            asyncio.ensure_future(self.group.leave())
            self.group = None


class SimTxnKafka(SimKafka):
    """`workloads.txn.TxnConnection` on the simulator: the read_committed `SimKafka` plus
    `logsim.txn_client.SimTxnProducer`, which writes a transaction's sends when it ends (AddPartitions,
    the batches, EndTxn), as a client that batches until the commit would."""

    def __init__(self, client: SimKafkaClient, partitions: int, producer: SimTxnProducer, patience_s: float) -> None:
        super().__init__(client, partitions)
        self.producer = producer
        self.patience_s = patience_s
        self.writes: list[tuple[int, int]] = []

    async def begin(self) -> None:
        if self.producer.pid < 0 and not await self.producer.init(patience_s=self.patience_s):
            raise ConnectionError("InitProducerId: no answer from a transaction coordinator")
        self.writes = []

    def send(self, key: int, value: int) -> None:
        self.writes.append((key, value))

    async def end(self, commit: bool, offsets: dict[int, int] | None = None) -> tuple[str, list[int | None], str]:
        if offsets:
            raise NotImplementedError("the simulated transactional client has no TxnOffsetCommit (--txn-mode ctp)")
        if not self.writes:  # nothing was sent: the client ends it without a word to the coordinator
            return ("committed" if commit else "aborted"), [], ""
        outcome = await self.producer.transaction(self.writes, commit)
        if outcome != "committed":
            return outcome, [None] * len(self.writes), "" if outcome == "aborted" and not commit else outcome
        seen: dict[int, int] = {}
        out: list[int | None] = []
        for key, _ in self.writes:
            base = self.producer.offsets.get(key)
            out.append(None if base is None else base + seen.get(key, 0))
            seen[key] = seen.get(key, 0) + 1
        return outcome, out, ""

    async def positions(self, keys: list[int]) -> dict[int, int]:
        return {k: self.k.positions[k] for k in keys if k in self.k.positions}

    def rewind(self, to: dict[int, int]) -> None:
        for k, offset in to.items():
            if k in self.k.positions:
                self.k.positions[k] = offset
                self.k.buffered.pop(k, None)

    def held(self) -> list[int]:
        return sorted(self.group.assigned if self.group is not None else self.k.positions)

