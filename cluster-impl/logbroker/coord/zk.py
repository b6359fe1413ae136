"""`ZkStore`: the metadata store on a real ZooKeeper, through kazoo.

Everything the controller writes goes through versioned, conditional writes; a `BadVersion` means
someone else (a newer controller) changed it first, and the caller must re-read, never overwrite.
Watches fire on kazoo's thread; `on_change` callbacks are expected to hop to their own loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from logbroker.coord import paths

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def to_json(self) -> bytes:
        return json.dumps({"leader": self.leader, "leader_epoch": self.leader_epoch, "isr": list(self.isr),
                           "controller_epoch": self.controller_epoch}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> PartitionState:
        d = json.loads(raw)
        return cls(int(d["leader"]), int(d["leader_epoch"]), tuple(int(x) for x in d["isr"]), int(d["controller_epoch"]))


class StaleVersion(Exception):
    """A conditional write lost: the znode changed since we read it."""


class ZkStore:
    def __init__(self, hosts: str, session_timeout_ms: int) -> None:
        self.zk = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000.0)
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
    def register_broker(self, bid: int, host: str, port: int) -> int:
        """Create our ephemeral registration; its creation zxid is our broker epoch (seed 003, KIP-380)."""
        path = paths.broker(bid)
        try:
            self.zk.create(path, json.dumps({"host": host, "port": port}).encode(), ephemeral=True)
        except NodeExistsError:
            # a previous session of ours may linger until it expires: replace it once it is gone
            self.zk.delete(path)
            self.zk.create(path, json.dumps({"host": host, "port": port}).encode(), ephemeral=True)
        _, stat = self.zk.get(path)
        return int(stat.czxid)

    def live_brokers(self, watch: Callable[[Any], None] | None = None) -> dict[int, tuple[str, int, int]]:
        """broker id -> (host, port, broker epoch)."""
        out = {}
        for child in self.zk.get_children(paths.BROKER_IDS, watch=watch):
            try:
                raw, stat = self.zk.get(paths.broker(int(child)))
            except NoNodeError:
                continue
            d = json.loads(raw)
            out[int(child)] = (d["host"], int(d["port"]), int(stat.czxid))
        return out

    # --- controller ----------------------------------------------------------------------------
    def try_become_controller(self, bid: int) -> int | None:
        """Create /controller; on success bump /controller_epoch and return the new epoch."""
        try:
            self.zk.create(paths.CONTROLLER, json.dumps({"version": 1, "brokerid": bid}).encode(), ephemeral=True)
        except NodeExistsError:
            return None
        while True:
            try:
                raw, stat = self.zk.get(paths.CONTROLLER_EPOCH)
                epoch = int(raw) + 1
                self.zk.set(paths.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
                return epoch
            except NoNodeError:
                try:
                    self.zk.create(paths.CONTROLLER_EPOCH, b"1")
                    return 1
                except NodeExistsError:
                    continue
            except BadVersionError:
                continue

    def controller(self, watch: Callable[[Any], None] | None = None) -> int | None:
        try:
            raw, _ = self.zk.get(paths.CONTROLLER, watch=watch)
            return int(json.loads(raw)["brokerid"])
        except NoNodeError:
            if watch is not None:
                self.zk.exists(paths.CONTROLLER, watch=watch)
            return None

    def controller_epoch(self) -> int:
        try:
            return int(self.zk.get(paths.CONTROLLER_EPOCH)[0])
        except NoNodeError:
            return 0

    # --- topics and partitions -----------------------------------------------------------------
    def topics(self, watch: Callable[[Any], None] | None = None) -> list[str]:
        return sorted(self.zk.get_children(paths.TOPICS, watch=watch))

    def assignment(self, topic: str) -> dict[int, list[int]]:
        raw, _ = self.zk.get(paths.topic(topic))
        return {int(p): list(r) for p, r in json.loads(raw)["partitions"].items()}

    def create_topic(self, topic: str, assignment: dict[int, list[int]]) -> bool:
        try:
            self.zk.create(paths.topic(topic), json.dumps({"version": 1, "partitions": {
                str(p): r for p, r in assignment.items()}}).encode())
            return True
        except NodeExistsError:
            return False

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
