"""`ZooKeeperModel`: the coordination service model, and `ZkClient`, one broker's kazoo-like handle.

The brokers run the production `ZkStore` on top of `ZkClient` (the same calls kazoo answers), so
the layout, the conditional writes and the transactions under test are the real ones.

Model — what ZooKeeper promises and no more:
- One tree of znodes with data, a version (bumped by every set), a creation zxid (czxid: the
  broker epoch) and, for ephemeral nodes, the owning session. Every write gets the next zxid; all
  clients see writes in zxid order (linearizable writes; reads here are never stale, which real
  ZooKeeper allows — a model simplification on the strong side, named here).
- Conditional writes: `set(version=v)` fails with BadVersionError unless the version is v; a
  transaction (multi-op) applies all of its ops or none, and names the op that failed.
- Watches are one-shot: a data watch (`get`, `exists`) fires on the node's change or deletion (and,
  for `exists`, creation); a child watch (`get_children`) on a child's creation or deletion or the
  node's deletion. They are delivered to the watcher's node in zxid order, after the write, as
  callbacks on that node (held while it is paused: a paused broker learns late).
- Sessions: a client is *connected* while its process runs (not paused, not dead) and it can
  reach a majority of the ensemble (one ZooKeeper server per node, as the container deployment
  has; grudges cut it, including ZooKeeper-port-only ones). While disconnected its calls raise
  ConnectionLoss and its listeners hear SUSPENDED. A session not heard from for its timeout expires:
  its ephemeral nodes are deleted (firing watches), and when the client is connected again its
  listeners hear LOST, then CONNECTED on a new session (kazoo's sequence).
- Requests take no simulated time (the broker's offload for store calls is `inline`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat

from logsim.loop import Incarnation, SimLoop

log = logging.getLogger(__name__)
TICK_S = 0.1


@dataclass
class ZNode:
    data: bytes
    czxid: int
    mzxid: int
    version: int = 0
    owner: int = 0  # ephemeral: the session id
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid, 0, 0, self.version, 0, 0, self.owner, len(self.data),
                         len(self.children), self.czxid)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


@dataclass
class Session:
    id: int
    client: ZkClient
    timeout_s: float
    last_heard: float
    expired: bool = False


Watch = Callable[[Any], None]


class ZooKeeperModel:
    def __init__(self, loop: SimLoop, members: list[str], reachable: Callable[[str, str], bool]) -> None:
        """`members`: the nodes an ensemble server runs on; `reachable(a, b)`: can a's client talk
        to b's ZooKeeper server now (the network's grudges)."""
        self.loop = loop
        self.members = list(members)
        self.reachable = reachable
        self.paused_servers: set[str] = set()
        self.nodes: dict[str, ZNode] = {"/": ZNode(b"", 0, 0)}
        self.zxid = 0
        self.sessions: dict[int, Session] = {}
        self._next_session = 0x1000
        self.data_watches: dict[str, list[tuple[ZkClient, Watch]]] = {}
        self.child_watches: dict[str, list[tuple[ZkClient, Watch]]] = {}
        self._ticker = loop.spawn(None, self._tick(), name="zookeeper")

    # --- sessions --------------------------------------------------------------------------------
    def has_quorum(self, host: str) -> bool:
        ok = sum(1 for m in self.members if m not in self.paused_servers and (m == host or self.reachable(host, m)))
        return ok * 2 > len(self.members)

    def open_session(self, client: ZkClient, timeout_s: float) -> Session:
        self._next_session += 1
        s = Session(self._next_session, client, timeout_s, self.loop.time())
        self.sessions[s.id] = s
        return s

    def close_session(self, s: Session) -> None:
        if not s.expired:
            s.expired = True
            self._drop_ephemerals(s.id)
        self.sessions.pop(s.id, None)

    async def _tick(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(TICK_S)
            now = self.loop.time()
            for s in list(self.sessions.values()):
                c = s.client
                if c.running():
                    if s.expired:
                        continue
                    if c.reachable_now():
                        s.last_heard = now
                        c._set_state(KazooState.CONNECTED)
                    else:
                        c._set_state(KazooState.SUSPENDED)
                if not s.expired and now - s.last_heard > s.timeout_s:
                    log.info("zookeeper: session %x of %s expired", s.id, c.host)
                    s.expired = True
                    self._drop_ephemerals(s.id)
            for c in list(dict.fromkeys(s.client for s in self.sessions.values() if s.expired)):
                if c.session is not None and c.session.expired and c.running() and c.reachable_now():
                    c._renew()

    def _drop_ephemerals(self, sid: int) -> None:
        for path in sorted((p for p, n in self.nodes.items() if n.owner == sid), reverse=True):
            self._delete(path)

    # --- the tree --------------------------------------------------------------------------------
    def _fire(self, table: dict[str, list[tuple[ZkClient, Watch]]], path: str, kind: str) -> None:
        for client, w in table.pop(path, []):
            event = WatchedEvent(kind, KazooState.CONNECTED, path)
            self.loop.call_in(client.inc, 0, w, event)

    def _create(self, path: str, data: bytes, owner: int) -> ZNode:
        self.zxid += 1
        n = self.nodes[path] = ZNode(bytes(data), self.zxid, self.zxid, owner=owner)
        self.nodes[_parent(path)].children.add(path.rsplit("/", 1)[1])
        self._fire(self.data_watches, path, EventType.CREATED)
        self._fire(self.child_watches, _parent(path), EventType.CHILD)
        return n

    def _set(self, path: str, data: bytes) -> ZNode:
        self.zxid += 1
        n = self.nodes[path]
        n.data, n.version, n.mzxid = bytes(data), n.version + 1, self.zxid
        self._fire(self.data_watches, path, EventType.CHANGED)
        return n

    def _delete(self, path: str) -> None:
        self.zxid += 1
        del self.nodes[path]
        self.nodes[_parent(path)].children.discard(path.rsplit("/", 1)[1])
        self._fire(self.data_watches, path, EventType.DELETED)
        self._fire(self.child_watches, path, EventType.DELETED)
        self._fire(self.child_watches, _parent(path), EventType.CHILD)

    def check_create(self, path: str, makepath: bool, pending: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        if path in self.nodes or path in pending:
            raise NodeExistsError(path)
        if not makepath and _parent(path) not in self.nodes and _parent(path) not in pending:
            raise NoNodeError(_parent(path))

    def check_set(self, path: str, version: int) -> None:
        n = self.nodes.get(path)
        if n is None:
            raise NoNodeError(path)
        if version != -1 and n.version != version:
            raise BadVersionError(path)


class Transaction:
    def __init__(self, client: ZkClient) -> None:
        self.client = client
        self.ops: list[tuple[str, str, bytes, Any]] = []

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False) -> None:
        self.ops.append(("create", path, value, ephemeral))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self.ops.append(("set", path, value, version))

    def commit(self) -> list[Any]:
        c = self.client
        c._check()
        zk = c.zk
        pending: set[str] = set()
        failed: int | None = None
        error: Exception | None = None
        for i, (kind, path, _, arg) in enumerate(self.ops):
            try:
                if kind == "create":
                    zk.check_create(path, False, pending)
                    pending.add(path)
                else:
                    zk.check_set(path, arg)
            except Exception as e:  # the op that fails the transaction
                failed, error = i, e
                break
        if failed is not None:
            return [error if i == failed else RolledBackError() for i in range(len(self.ops))]
        out: list[Any] = []
        for kind, path, value, arg in self.ops:
            if kind == "create":
                zk._create(path, value, c.session.id if arg and c.session else 0)
                out.append(path)
            else:
                out.append(zk._set(path, value).stat())
        return out


class ZkClient:
    """The part of `kazoo.client.KazooClient` that `ZkStore` uses, on the model."""

    def __init__(self, zk: ZooKeeperModel, host: str, inc: Incarnation, timeout_s: float) -> None:
        self.zk, self.host, self.inc, self.timeout_s = zk, host, inc, timeout_s
        self.session: Session | None = None
        self.state = KazooState.LOST
        self._listeners: list[Callable[[str], Any]] = []

    def running(self) -> bool:
        return not self.inc.dead and not self.inc.paused and self.session is not None

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password), as kazoo's; None before the first session."""
        return (self.session.id, b"") if self.session is not None else None

    def reachable_now(self) -> bool:
        return self.zk.has_quorum(self.host)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            for cb in list(self._listeners):
                self.zk.loop.call_in(self.inc, 0, cb, state)

    def _renew(self) -> None:
        """After expiry: LOST, then a new session (CONNECTED), as kazoo reconnects."""
        self._set_state(KazooState.LOST)
        self.session = self.zk.open_session(self, self.timeout_s)
        self._set_state(KazooState.CONNECTED)

    def _check(self) -> None:
        if self.session is None or self.inc.dead:
            raise ConnectionLoss("not started")
        if self.session.expired or not self.reachable_now():
            raise ConnectionLoss(f"{self.host}: no ZooKeeper quorum reachable")

    # --- life cycle ------------------------------------------------------------------------------
    def add_listener(self, cb: Callable[[str], Any]) -> None:
        self._listeners.append(cb)

    def start(self, timeout: float = 15.0) -> None:
        if not self.reachable_now():
            raise ConnectionLoss(f"{self.host}: no ZooKeeper quorum reachable")
        self.session = self.zk.open_session(self, self.timeout_s)
        self.state = KazooState.CONNECTED

    def stop(self) -> None:
        if self.session is not None:
            self.zk.close_session(self.session)
            self.session = None

    def close(self) -> None:
        return None

    # --- reads -----------------------------------------------------------------------------------
    def _watch(self, table: dict[str, list[tuple[ZkClient, Watch]]], path: str, watch: Watch | None) -> None:
        if watch is not None:
            lst = table.setdefault(path, [])
            if not any(c is self and w is watch for c, w in lst):
                lst.append((self, watch))

    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat]:
        self._check()
        n = self.zk.nodes.get(path)
        if n is None:
            raise NoNodeError(path)
        self._watch(self.zk.data_watches, path, watch)
        return n.data, n.stat()

    def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        self._check()
        self._watch(self.zk.data_watches, path, watch)
        n = self.zk.nodes.get(path)
        return n.stat() if n is not None else None

    def get_children(self, path: str, watch: Watch | None = None) -> list[str]:
        self._check()
        n = self.zk.nodes.get(path)
        if n is None:
            raise NoNodeError(path)
        self._watch(self.zk.child_watches, path, watch)
        return sorted(n.children)

    # --- writes ----------------------------------------------------------------------------------
    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, makepath: bool = False) -> str:
        self._check()
        self.zk.check_create(path, makepath)
        if makepath:
            self._ensure(_parent(path))
        assert self.session is not None
        self.zk._create(path, value, self.session.id if ephemeral else 0)
        return path

    def _ensure(self, path: str) -> None:
        if path in self.zk.nodes:
            return
        self._ensure(_parent(path))
        self.zk._create(path, b"", 0)

    def ensure_path(self, path: str) -> bool:
        self._check()
        self._ensure(path)
        return True

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        self._check()
        self.zk.check_set(path, version)
        return self.zk._set(path, value).stat()

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        self._check()
        n = self.zk.nodes.get(path)
        if n is None:
            raise NoNodeError(path)
        if n.children and not recursive:
            raise NotEmptyError(path)
        if version != -1 and n.version != version:
            raise BadVersionError(path)
        self._delete_tree(path)
        return True

    def _delete_tree(self, path: str) -> None:
        for child in sorted(self.zk.nodes[path].children):
            self._delete_tree(f"{path}/{child}" if path != "/" else f"/{child}")
        self.zk._delete(path)

    def transaction(self) -> Transaction:
        return Transaction(self)
