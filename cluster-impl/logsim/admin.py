"""`SimAdmin`: the operator's ZooKeeper handle on the model — what the harness's kazoo client does in a
container run (`harness/systems/logbroker/db.py`: `request_reassignment`, `request_preferred_election`,
`assignment`), through the same admin paths of seed 003 (`logbroker.coord.paths`).

Model: the operator's client runs on the control host, which a partition never cuts off, so it
reaches every ZooKeeper server that is not paused; with no quorum of running servers its calls
raise ConnectionLoss, as kazoo's would. Writes go through the model's tree, so they get zxids and
fire the controller's watches like any other write.
"""

from __future__ import annotations

import json
from typing import Any

from kazoo.exceptions import ConnectionLoss, NodeExistsError
from logbroker.coord import paths

from logsim.zookeeper import ZooKeeperModel


class SimAdmin:
    def __init__(self, zk: ZooKeeperModel) -> None:
        self.zk = zk

    def _check(self) -> None:
        up = sum(1 for m in self.zk.members if m not in self.zk.paused_servers)
        if up * 2 <= len(self.zk.members):
            raise ConnectionLoss("control: no ZooKeeper quorum running")

    def _create(self, path: str, data: bytes) -> None:
        """kazoo's `create(path, data, makepath=True)`."""
        if path in self.zk.nodes:
            raise NodeExistsError(path)
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            parent = "/" + "/".join(parts[:i])
            if parent not in self.zk.nodes:
                self.zk._create(parent, b"", 0)
        self.zk._create(path, data, 0)

    def request_reassignment(self, topic: str, partition: int, broker_ids: list[int]) -> None:
        """Ask the controller to move a partition; a move still under way is redirected, as Kafka does."""
        self._check()
        path = paths.admin_entry(paths.REASSIGN, topic, partition)
        data = json.dumps({"version": 1, "replicas": broker_ids}).encode()
        try:
            self._create(path, data)
        except NodeExistsError:
            self.zk._set(path, data)

    def request_preferred_election(self, topic: str, partitions: list[int]) -> bool:
        """False when an earlier request is still pending (the controller takes one at a time)."""
        self._check()
        body = {"version": 1, "partitions": [{"topic": topic, "partition": p} for p in partitions]}
        try:
            self._create(paths.PREFERRED_ELECTION, json.dumps(body).encode())
            return True
        except NodeExistsError:
            return False

    def assignment_ids(self, topic: str, partition: int) -> dict[str, list[int]] | None:
        """The partition's entry in the topic znode: {"replicas", "adding", "removing"} (broker ids)."""
        self._check()
        n = self.zk.nodes.get(paths.topic(topic))
        if n is None or not n.data:
            return None
        d: dict[str, Any] = json.loads(n.data)
        key = str(partition)
        if key not in d.get("partitions", {}):
            return None
        return {"replicas": list(d["partitions"][key]), "adding": list((d.get("adding_replicas") or {}).get(key, [])),
                "removing": list((d.get("removing_replicas") or {}).get(key, []))}
