"""The records the controller keeps in the metadata store, as plain values (no I/O).

`PartitionState` is seed 003's LeaderAndISR znode; `ReplicaAssignment` is one partition's entry in
the topic znode; `ProducerIdBlock` is Kafka's `/latest_producer_id_block`. They live apart from
`zk.py` so the controller's rules, and later the simulation backend's in-memory store, can use them
without importing kazoo.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    #: KIP-966's eligible leader replicas: members that left the ISR while it was below
    #: min.insync.replicas, so nothing was committed without them (`controller.decisions.next_elr`)
    elr: tuple[int, ...] = ()

    def to_json(self) -> bytes:
        d = {"leader": self.leader, "leader_epoch": self.leader_epoch, "isr": list(self.isr),
             "controller_epoch": self.controller_epoch}
        return json.dumps({**d, "elr": list(self.elr)} if self.elr else d).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> PartitionState:
        d = json.loads(raw)
        return cls(int(d["leader"]), int(d["leader_epoch"]), tuple(int(x) for x in d["isr"]),
                   int(d["controller_epoch"]), tuple(int(x) for x in d.get("elr", ())))


@dataclass(frozen=True, slots=True)
class Registration:
    """A live broker's registration: where it listens, its broker epoch (the znode's czxid, KIP-380),
    and, when its process started without its data (its log directory had no meta file: KIP-966's
    unclean restart, a replaced disk), that process's incarnation (every registration of that
    process carries it, so a controller handles the loss once per process, not per session)."""

    host: str
    port: int
    epoch: int
    lost_data: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's assigned replicas (AR, seed 003: the first is the preferred replica).

    While a reassignment runs (seed 003 F), AR is the union of the original and the target replicas,
    and — as KIP-455 later wrote into the topic znode — `adding`/`removing` say which is which. That
    makes an interrupted reassignment resumable by the next controller: the target and the original
    set are both recoverable from the store alone.
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """AR becomes the original replicas, in their order, then the new ones. A second reassignment
        of a partition that is still moving starts from its *original* replicas, so replicas that were
        only being added (and are not in the new target) drop out at once.

        The original order is kept (not the target's) so that a cancelled move restores the same
        preferred replica, and leadership does not shift while data is still being copied; the
        target's own order is in the reassignment request and becomes AR when the move completes."""
        origin = self.original
        full = tuple(dict.fromkeys([*origin, *target]))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def completed(self, order: Sequence[int] | None = None) -> ReplicaAssignment:
        """AR := the target, in the requested `order` when given."""
        if order is not None and set(order) == set(self.target):
            return ReplicaAssignment(tuple(order))
        return ReplicaAssignment(self.target)


def assignment_to_json(parts: dict[int, ReplicaAssignment]) -> bytes:
    """The topic znode. `adding_replicas`/`removing_replicas` list only the partitions that are moving
    (empty maps otherwise, so a reader never has to tell "absent" from "nothing moves")."""
    body: dict[str, object] = {"version": 2, "partitions": {str(p): list(a.replicas) for p, a in sorted(parts.items())}}
    adding = {str(p): list(a.adding) for p, a in sorted(parts.items()) if a.adding}
    removing = {str(p): list(a.removing) for p, a in sorted(parts.items()) if a.removing}
    body["adding_replicas"] = adding
    body["removing_replicas"] = removing
    return json.dumps(body).encode()


def assignment_from_json(raw: bytes) -> dict[int, ReplicaAssignment]:
    d = json.loads(raw)
    adding = d.get("adding_replicas") or {}
    removing = d.get("removing_replicas") or {}
    return {int(p): ReplicaAssignment(tuple(int(x) for x in r), tuple(int(x) for x in adding.get(p, ())),
                                      tuple(int(x) for x in removing.get(p, ())))
            for p, r in d["partitions"].items()}


PRODUCER_ID_BLOCK = 1000  # ids per block: Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids `first`..`last` (both included), claimed by broker `broker`: Kafka's `ProducerIdsBlock`,
    stored in `/latest_producer_id_block` as Kafka's `ProducerIdBlockZNode` writes it (version 1,
    the ids as decimal strings)."""

    broker: int
    first: int
    last: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def following(self, broker: int, size: int = PRODUCER_ID_BLOCK) -> ProducerIdBlock:
        """The block a broker claims after this one."""
        return ProducerIdBlock(broker, self.last + 1, self.last + size)

    @staticmethod
    def first_block(broker: int, size: int = PRODUCER_ID_BLOCK) -> ProducerIdBlock:
        return ProducerIdBlock(broker, 0, size - 1)

    def to_json(self) -> bytes:
        return json.dumps({"version": 1, "broker": self.broker, "block_start": str(self.first),
                           "block_end": str(self.last)}).encode()

    @staticmethod
    def from_json(raw: bytes) -> ProducerIdBlock:
        d = json.loads(raw)
        return ProducerIdBlock(int(d["broker"]), int(d["block_start"]), int(d["block_end"]))
