"""`ZkStore`: the metadata store on a real ZooKeeper, through kazoo.

Everything the controller writes goes through versioned, conditional writes; a `BadVersion` means
someone else (a newer controller) changed it first, and the caller must re-read, never overwrite.
Watches fire on kazoo's thread; `on_change` callbacks are expected to hop to their own loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.retry import KazooRetry

from logbroker.coord import paths
from logbroker.coord.model import (
    PRODUCER_ID_BLOCK,
    PartitionState,
    ProducerIdBlock,
    Registration,
    ReplicaAssignment,
    assignment_from_json,
    assignment_to_json,
)
from logbroker.coord.store import StaleVersion, Watch

__all__ = ["PartitionState", "ReplicaAssignment", "StaleVersion", "ZkStore"]


def _config_json(configs: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": configs}).encode()

log = logging.getLogger(__name__)

#: The longest pause between two rounds of connection attempts to the ensemble. kazoo's default
#: doubles the pause after every failed round up to an hour (`retry_max_delay=3600`), and resets it
#: only once a handshake succeeds. A broker cut off from a ZooKeeper quorum (its local server accepts
#: and drops it, having no quorum) was back 2 to 33 s after the heal of a 20- to 60-s cut (README,
#: "Back on ZooKeeper"), its controller, coordinators and ISR updates deaf all that time. ZooKeeper's
#: own Java client, which Kafka uses, waits at most about a second between rounds (its host provider's
#: spin delay plus a random pause under a second); so do we.
RECONNECT_MAX_DELAY_S = 1.0


def connection_retry() -> KazooRetry:
    """Forever, from 0.1 s doubling to `RECONNECT_MAX_DELAY_S` (times a jitter of ±40%)."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_jitter=0.4, max_delay=RECONNECT_MAX_DELAY_S)


class ZkStore:
    def __init__(self, hosts: str, session_timeout_ms: int, client: Any = None) -> None:
        """`client`: a kazoo-compatible client to use instead of a `KazooClient` on `hosts` (the
        simulator's ZooKeeper model hands in its own, so this very code runs there too)."""
        self.zk = client if client is not None else KazooClient(
            hosts=hosts, timeout=session_timeout_ms / 1000.0, connection_retry=connection_retry())
        self.session_listeners: list[Callable[[str], None]] = []
        self.zk.add_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        for cb in self.session_listeners:
            cb(state)

    def start(self, timeout: float = 30.0) -> None:
        self.zk.start(timeout=timeout)
        for p in (paths.BROKER_IDS, paths.TOPICS):
            self.zk.ensure_path(p)

    def stop(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        except Exception as e:  # closing must not hide why we stop
            log.debug("closing ZooKeeper: %s", e)

    @property
    def connected(self) -> bool:
        return self.zk.state == KazooState.CONNECTED

    # --- brokers -------------------------------------------------------------------------------
    def register_broker(self, bid: int, host: str, port: int, lost_data: str = "") -> int:
        """Create our ephemeral registration; its creation zxid is our broker epoch (seed 003, KIP-380).
        `lost_data`: this process's incarnation, when it found its log directory without its meta file
        (KIP-966)."""
        path = paths.broker(bid)
        body = json.dumps({"host": host, "port": port, **({"lost_data": lost_data} if lost_data else {})}).encode()
        try:
            self.zk.create(path, body, ephemeral=True)
        except NodeExistsError:
            # a previous session of ours may linger until it expires: replace it once it is gone
            self.zk.delete(path)
            self.zk.create(path, body, ephemeral=True)
        _, stat = self.zk.get(path)
        return int(stat.czxid)

    def registrations(self, watch: Watch | None = None) -> dict[int, Registration]:
        """broker id -> its live registration."""
        out = {}
        for child in self.zk.get_children(paths.BROKER_IDS, watch=watch):
            try:
                raw, stat = self.zk.get(paths.broker(int(child)))
            except NoNodeError:
                continue
            d = json.loads(raw)
            out[int(child)] = Registration(d["host"], int(d["port"]), int(stat.czxid), str(d.get("lost_data") or ""))
        return out

    def live_brokers(self, watch: Watch | None = None) -> dict[int, tuple[str, int, int]]:
        """broker id -> (host, port, broker epoch)."""
        return {b: (r.host, r.port, r.epoch) for b, r in self.registrations(watch).items()}

    def lost_data_handled(self, bid: int) -> str | None:
        """The incarnation of the broker's last lost-data process a controller has handled."""
        try:
            raw, _ = self.zk.get(paths.lost_data_handled(bid))
        except NoNodeError:
            return None
        return bytes(raw).decode()

    def mark_lost_data_handled(self, bid: int, incarnation: str) -> None:
        path = paths.lost_data_handled(bid)
        try:
            self.zk.create(path, incarnation.encode(), makepath=True)
        except NodeExistsError:
            self.zk.set(path, incarnation.encode())

    # --- controller ----------------------------------------------------------------------------
    def try_become_controller(self, bid: int) -> int | None:
        """Create /controller and bump /controller_epoch in one ZooKeeper transaction; the new epoch,
        or None if another broker is controller. Atomic (as Kafka's later controller registration is)
        so nobody can see the new controller with the old epoch, and a controller that dies between
        the two writes cannot leave an epoch that no controller owns."""
        me = json.dumps({"version": 1, "brokerid": bid}).encode()
        while True:
            try:
                raw, stat = self.zk.get(paths.CONTROLLER_EPOCH)
                epoch, version = int(raw) + 1, int(stat.version)
            except NoNodeError:
                epoch, version = 1, -1
            tx = self.zk.transaction()
            tx.create(paths.CONTROLLER, me, ephemeral=True)
            if version < 0:
                tx.create(paths.CONTROLLER_EPOCH, b"1")
            else:
                tx.set_data(paths.CONTROLLER_EPOCH, str(epoch).encode(), version=version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                return epoch
            if isinstance(results[0], NodeExistsError):
                return None  # someone else won /controller
            # the epoch moved under us (another broker won and lost meanwhile): read it again

    def controller(self, watch: Watch | None = None) -> int | None:
        try:
            raw, _ = self.zk.get(paths.CONTROLLER, watch=watch)
            return int(json.loads(raw)["brokerid"])
        except NoNodeError:
            if watch is not None:
                self.zk.exists(paths.CONTROLLER, watch=watch)
            return None

    def drop_controller_of_dead_session(self, bid: int) -> bool:
        """/controller names us but belongs to another session: an earlier process of this broker
        that died before its session expired. It must not count as our win — we would control with the
        dead process's epoch, unfenced from whatever that process still had in flight, until the
        session expires — so delete it (only the version we read), as `register_broker` replaces its
        registration, and the brokers' watches elect a controller with a new epoch now."""
        try:
            raw, stat = self.zk.get(paths.CONTROLLER)
        except NoNodeError:
            return False
        session = self.zk.client_id
        if int(json.loads(raw)["brokerid"]) != bid or (session is not None and stat.ephemeralOwner == session[0]):
            return False
        with contextlib.suppress(NoNodeError, BadVersionError):
            self.zk.delete(paths.CONTROLLER, version=stat.version)
        log.info("broker %d: removed /controller left by an earlier session of ours", bid)
        return True

    def controller_epoch(self) -> int:
        try:
            return int(self.zk.get(paths.CONTROLLER_EPOCH)[0])
        except NoNodeError:
            return 0

    # --- producer ids (Kafka's ZooKeeper-mode ProducerIdManager) -------------------------------
    def claim_producer_id_block(self, bid: int, size: int = PRODUCER_ID_BLOCK) -> ProducerIdBlock:
        """Read `/latest_producer_id_block` with its version, write the next block conditionally on
        that version (create it when absent), and on BadVersion/NodeExists — another broker claimed
        one in between — read again. The znode only ever moves forward, so an id handed out from a
        claimed block is never handed out again, whatever any broker's disk forgets."""
        path = paths.LATEST_PRODUCER_ID_BLOCK
        while True:
            try:
                raw, stat = self.zk.get(path)
                block, version = ProducerIdBlock.from_json(raw).following(bid, size), int(stat.version)
            except NoNodeError:
                block, version = ProducerIdBlock.first_block(bid, size), -1
            if block.last >= 2**63 - 1:
                raise RuntimeError(f"producer ids exhausted: {path} is at {block.first}")
            try:
                if version < 0:
                    self.zk.create(path, block.to_json())
                else:
                    self.zk.set(path, block.to_json(), version=version)
            except (BadVersionError, NodeExistsError):
                log.info("broker %d: %s moved under our claim; reading it again", bid, path)
                continue
            log.info("broker %d claimed producer ids %d..%d", bid, block.first, block.last)
            return block

    # --- topics and partitions -----------------------------------------------------------------
    def topics(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.zk.get_children(paths.TOPICS, watch=watch))

    def topic_assignment(self, topic: str) -> tuple[dict[int, ReplicaAssignment], int]:
        """The topic znode and its version (the controller rewrites it conditionally: seed 003 F, H)."""
        raw, stat = self.zk.get(paths.topic(topic))
        return assignment_from_json(raw), int(stat.version)

    def write_topic_assignment(self, topic: str, parts: dict[int, ReplicaAssignment], expected_version: int) -> int:
        try:
            return int(self.zk.set(paths.topic(topic), assignment_to_json(parts), version=expected_version).version)
        except (BadVersionError, NoNodeError):
            raise StaleVersion(paths.topic(topic)) from None

    def create_topic(self, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None) -> bool:
        """The config znode first, then the topic znode, in one transaction: the controller, woken by
        the topic, must find its configs (an unclean-election override, say) already there."""
        self.zk.ensure_path(paths.CONFIG_TOPICS)
        tx = self.zk.transaction()
        if self.zk.exists(paths.topic_config(topic)):
            tx.set_data(paths.topic_config(topic), _config_json(configs or {}))
        else:
            tx.create(paths.topic_config(topic), _config_json(configs or {}))
        tx.create(paths.topic(topic), assignment_to_json(
            {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}))
        results = tx.commit()
        return not any(isinstance(r, Exception) for r in results)

    def topic_config(self, topic: str) -> dict[str, str]:
        try:
            raw, _ = self.zk.get(paths.topic_config(topic))
        except NoNodeError:
            return {}
        try:
            return {str(k): str(v) for k, v in json.loads(raw).get("config", {}).items()}
        except (ValueError, AttributeError) as e:
            log.warning("ignoring malformed %s: %r", paths.topic_config(topic), e)
            return {}

    def write_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        self.zk.ensure_path(paths.CONFIG_TOPICS)
        try:
            self.zk.set(paths.topic_config(topic), _config_json(configs))
        except NoNodeError:
            self.zk.create(paths.topic_config(topic), _config_json(configs))

    def delete_topic(self, topic: str) -> None:
        """The topic's znodes: assignment, partition states, configs, and any admin requests for it."""
        for path in (paths.topic(topic), paths.topic_config(topic), f"{paths.REASSIGN}/{topic}",
                     f"{paths.PARTITIONS_ADD}/{topic}"):
            with contextlib.suppress(NoNodeError):
                self.zk.delete(path, recursive=True)

    def partition_state(self, topic: str, p: int) -> tuple[PartitionState, int] | None:
        try:
            raw, stat = self.zk.get(paths.partition_state(topic, p))
            return PartitionState.from_json(raw), int(stat.version)
        except NoNodeError:
            return None

    def write_partition_state(self, topic: str, p: int, state: PartitionState, expected_version: int | None) -> int:
        """Create (expected_version None) or conditionally update; returns the new version."""
        path = paths.partition_state(topic, p)
        try:
            if expected_version is None:
                self.zk.create(path, state.to_json(), makepath=True)
                return 0
            stat = self.zk.set(path, state.to_json(), version=expected_version)
            return int(stat.version)
        except (BadVersionError, NodeExistsError):
            raise StaleVersion(path) from None

    # --- admin requests (seed 003 paths 5 and 6; Kafka's preferred-election path) -----------------
    def admin_requests(self, root: str, watch: Watch | None = None) -> dict[tuple[str, int], list[int]]:
        """Every `<root>/<topic>/<partition>` entry -> its replica list. The watch is set on the root,
        on each topic node and on each entry, so a new entry and a changed one both wake the caller."""
        self.zk.ensure_path(root)
        out: dict[tuple[str, int], list[int]] = {}
        for t in self.zk.get_children(root, watch=watch):
            try:
                children = self.zk.get_children(f"{root}/{t}", watch=watch)
            except NoNodeError:
                continue
            for p in children:
                try:
                    raw, _ = self.zk.get(f"{root}/{t}/{p}", watch=watch)
                    replicas = json.loads(raw)["replicas"]
                    out[(t, int(p))] = [int(r) for r in replicas]
                except NoNodeError:
                    continue
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("ignoring malformed admin request %s/%s/%s: %r", root, t, p, e)
        return out

    def put_admin_requests(self, root: str, entries: dict[tuple[str, int], list[int]]) -> None:
        """Create or replace entries; the creations happen in one ZooKeeper transaction, so a
        controller never sees half of a multi-partition request."""
        for t in sorted({t for t, _ in entries}):
            self.zk.ensure_path(f"{root}/{t}")
        tx = self.zk.transaction()
        updates = []
        for (t, p), replicas in sorted(entries.items()):
            data = json.dumps({"version": 1, "replicas": list(replicas)}).encode()
            path = paths.admin_entry(root, t, p)
            if self.zk.exists(path):
                updates.append((path, data))
            else:
                tx.create(path, data)
        for path, data in updates:
            tx.set_data(path, data)
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise StaleVersion(f"admin request under {root} raced with another writer: {failed[0]!r}")

    def delete_admin_request(self, root: str, topic: str, p: int) -> None:
        with contextlib.suppress(NoNodeError):
            self.zk.delete(paths.admin_entry(root, topic, p))
        with contextlib.suppress(NoNodeError, NotEmptyError):  # only once the topic has no entry left
            self.zk.delete(f"{root}/{topic}")

    def preferred_election_request(self, watch: Watch | None = None) -> list[tuple[str, int]] | None:
        try:
            raw, _ = self.zk.get(paths.PREFERRED_ELECTION, watch=watch)
        except NoNodeError:
            if watch is not None:
                self.zk.exists(paths.PREFERRED_ELECTION, watch=watch)
            return None
        try:
            return [(str(e["topic"]), int(e["partition"])) for e in json.loads(raw)["partitions"]]
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring malformed %s: %r", paths.PREFERRED_ELECTION, e)
            return []

    def delete_preferred_election_request(self) -> None:
        with contextlib.suppress(NoNodeError):
            self.zk.delete(paths.PREFERRED_ELECTION)
