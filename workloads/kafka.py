"""`KafkaConnection`: the Kafka client calls the queue workload's client makes — the seam between its
op logic (`queue.QueueClient`, written once) and a backend's client library: librdkafka in
containers (`librdkafka.py`), the simulated client in the simulator (`harness/provision/sim.py`).

Outcomes follow STYLE.md 10 on both: a send is `("ok", offset, None)` when acknowledged,
`("fail", None, why)` only when it certainly was not written, `("info", None, why)` otherwise.
"""

from __future__ import annotations

from typing import Any, Protocol

#: a read: key (as a string, JSON's way) -> [[offset, value], ...] in offset order
Read = dict[str, list[list[int]]]
#: one rebalance a subscribed consumer saw: {"revoked": [keys], "assigned": [keys]}
Rebalance = dict[str, list[int]]


class KafkaConnection(Protocol):
    """One process's producer and consumer."""

    async def send_many(self, sends: list[tuple[int, int]]) -> list[tuple[str, Any, str | None]]:
        """Produce every (key, value) together and wait once: (outcome, offset, error) per send."""
        ...

    def assign(self, keys: list[int]) -> None:
        """Kafka's assign: retained keys keep their position, new keys start at the beginning."""
        ...

    async def poll(self, timeout_s: float) -> Read:
        """What the consumer reads within `timeout_s` (a batch at most)."""
        ...

    async def watermarks(self, keys: list[int]) -> dict[int, int]:
        """Each key's high watermark now, asking again while leadership settles."""
        ...

    async def subscribe(self, group: str) -> list[Rebalance]:
        """Join `group` with a new consumer (leaving first if this one is a member or assigned keys);
        the rebalances the old consumer saw while it left."""
        ...

    def take_rebalances(self) -> list[Rebalance]:
        """The rebalances seen since the last call, in order (subscribe mode)."""
        ...

    async def fetch_committed(self) -> dict[str, Any]:
        """The group's committed offsets of the keys this consumer holds, as a poll's extra fields
        (`fetched-commits`); {} when there are none or the coordinator does not answer in time."""
        ...

    async def commit(self, read: Read) -> dict[str, Any]:
        """Commit the next offset of every key `read` holds that is still assigned: a poll's extra
        fields `commits` (acknowledged) and `commit-error` (refused or unknown)."""
        ...

    def close(self) -> None:
        """Leave the group (if a member) and release the client; idempotent."""
        ...
