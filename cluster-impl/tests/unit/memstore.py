"""`MemoryStore`: a `ClusterStore` in memory, for running the replica manager and controller with
no ZooKeeper. Watches fire once, synchronously, on the caller's thread (ZooKeeper's fire on kazoo's
thread; the controller and manager accept either). Not a model of sessions or of ZooKeeper's
ordering guarantees: a deterministic simulator needs those, these tests do not."""

from __future__ import annotations

from collections.abc import Callable

from logbroker.coord.model import PRODUCER_ID_BLOCK, PartitionState, ProducerIdBlock, Registration, ReplicaAssignment
from logbroker.coord.store import StaleVersion, Watch


class MemoryStore:
    def __init__(self) -> None:
        self.session_listeners: list[Callable[[str], None]] = []
        self.brokers: dict[int, tuple[str, int, int]] = {}
        self.lost: dict[int, str] = {}  # broker id -> the incarnation its registration says lost its data
        self.lost_handled: dict[int, str] = {}
        self.controller_id: int | None = None
        self.controller_epoch = 0
        self.assignments: dict[str, tuple[dict[int, ReplicaAssignment], int]] = {}
        self.states: dict[tuple[str, int], tuple[PartitionState, int]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.admin: dict[str, dict[tuple[str, int], list[int]]] = {}
        self.preferred: list[tuple[str, int]] | None = None
        self.producer_id_block: ProducerIdBlock | None = None
        self._watches: dict[str, set[Watch]] = {}
        self._zxid = 0
        self.calls: list[str] = []

    def _arm(self, key: str, watch: Watch | None) -> None:
        if watch is not None:
            self._watches.setdefault(key, set()).add(watch)

    def _fire(self, key: str) -> None:
        for w in self._watches.pop(key, set()):
            w(key)

    # --- BrokerRegistry ---------------------------------------------------------------------------
    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")

    def register_broker(self, bid: int, host: str, port: int, lost_data: str = "") -> int:
        self._zxid += 1
        self.brokers[bid] = (host, port, self._zxid)
        self.lost[bid] = lost_data
        self._fire("brokers")
        return self._zxid

    def controller(self, watch: Watch | None = None) -> int | None:
        self._arm("controller", watch)
        return self.controller_id

    def try_become_controller(self, bid: int) -> int | None:
        if self.controller_id is not None:
            return None
        self.controller_id, self.controller_epoch = bid, self.controller_epoch + 1
        self._fire("controller")
        return self.controller_epoch

    def drop_controller_of_dead_session(self, bid: int) -> bool:
        return False  # one process per store: no session outlives its process here

    def create_topic(self, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None) -> bool:
        if topic in self.assignments:
            return False
        self.configs[topic] = dict(configs or {})
        self.assignments[topic] = ({p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}, 0)
        self._fire("topics")
        return True

    # --- MetadataStore ----------------------------------------------------------------------------
    def live_brokers(self, watch: Watch | None = None) -> dict[int, tuple[str, int, int]]:
        self._arm("brokers", watch)
        return dict(self.brokers)

    def registrations(self, watch: Watch | None = None) -> dict[int, Registration]:
        return {b: Registration(h, p, e, self.lost.get(b, "")) for b, (h, p, e) in self.live_brokers(watch).items()}

    def lost_data_handled(self, bid: int) -> str | None:
        return self.lost_handled.get(bid)

    def mark_lost_data_handled(self, bid: int, incarnation: str) -> None:
        self.lost_handled[bid] = incarnation

    def topics(self, watch: Watch | None = None) -> list[str]:
        self._arm("topics", watch)
        return sorted(self.assignments)

    def topic_assignment(self, topic: str) -> tuple[dict[int, ReplicaAssignment], int]:
        parts, version = self.assignments[topic]
        return dict(parts), version

    def write_topic_assignment(self, topic: str, parts: dict[int, ReplicaAssignment], expected_version: int) -> int:
        if topic not in self.assignments or self.assignments[topic][1] != expected_version:
            raise StaleVersion(topic)
        self.assignments[topic] = (dict(parts), expected_version + 1)
        return expected_version + 1

    def partition_state(self, topic: str, p: int) -> tuple[PartitionState, int] | None:
        return self.states.get((topic, p))

    def write_partition_state(self, topic: str, p: int, state: PartitionState, expected_version: int | None) -> int:
        got = self.states.get((topic, p))
        if (expected_version is None) != (got is None) or (got is not None and got[1] != expected_version):
            raise StaleVersion(f"{topic}-{p}")
        version = 0 if got is None else got[1] + 1
        self.states[(topic, p)] = (state, version)
        return version

    def admin_requests(self, root: str, watch: Watch | None = None) -> dict[tuple[str, int], list[int]]:
        self._arm(root, watch)
        return dict(self.admin.get(root, {}))

    def put_admin_requests(self, root: str, entries: dict[tuple[str, int], list[int]]) -> None:
        self.admin.setdefault(root, {}).update(entries)
        self._fire(root)

    def delete_admin_request(self, root: str, topic: str, p: int) -> None:
        self.admin.get(root, {}).pop((topic, p), None)

    def preferred_election_request(self, watch: Watch | None = None) -> list[tuple[str, int]] | None:
        self._arm("preferred", watch)
        return self.preferred

    def delete_preferred_election_request(self) -> None:
        self.preferred = None

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get(topic, {}))

    def write_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        self.configs[topic] = dict(configs)

    def delete_topic(self, topic: str) -> None:
        self.assignments.pop(topic, None)
        self.configs.pop(topic, None)
        for key in [k for k in self.states if k[0] == topic]:
            del self.states[key]

    # --- ProducerIdStore ---------------------------------------------------------------------------
    def claim_producer_id_block(self, bid: int, size: int = PRODUCER_ID_BLOCK) -> ProducerIdBlock:
        last = self.producer_id_block
        self.producer_id_block = ProducerIdBlock.first_block(bid, size) if last is None else last.following(bid, size)
        return self.producer_id_block
