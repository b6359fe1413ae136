"""The queue workload's client on the simulator: the same invocations and completions as
`workloads.queue.QueueClient` (librdkafka), played through `logsim.client.SimKafkaClient`.

Outcomes follow the same rules: an op is `ok` only if every send was acknowledged, `fail` only if
every send certainly failed, `info` otherwise; a poll is `ok` with what it read; anything the
client cannot account for is `info` with the error, never `fail`.
"""

from __future__ import annotations

from typing import Any

from logsim.client import SimKafkaClient

from kernel.history import OpType
from kernel.workload import Completion, Invocation
from workloads.queue import DRAIN_POLL_TIMEOUT_S, POLL_TIMEOUT_S, complete_mops, sends_of


class SimQueueClient:
    def __init__(self, client: SimKafkaClient) -> None:
        self.k = client
        self.assigned: set[int] = set()
        self.ends: dict[int, int] | None = None

    async def invoke(self, op: Invocation) -> Completion:
        try:
            if op.f in ("assign", "subscribe"):
                self.k.assign(list(op.value))
                self.assigned = set(op.value)
                return Completion(OpType.OK, op.value)
            return await self._mops(op, bool(op.extra.get("final")))
        except Exception as e:  # we do not know what happened: info, never fail
            return Completion(OpType.INFO, op.value, {"error": f"{type(e).__name__}: {e}"})

    async def _mops(self, op: Invocation, final: bool) -> Completion:
        extra: dict[str, Any] = {}
        sent = await self.k.send_many(sends_of(op.value))
        reads: list[dict[str, Any]] = []
        for m in op.value:
            if m[0] == "send":
                continue
            if final and self.ends is None:
                self.ends = await self.k.high_watermarks(sorted(self.assigned))
            reads.append(await self.k.poll(DRAIN_POLL_TIMEOUT_S if final else POLL_TIMEOUT_S))
        if final and self.ends is not None:
            extra["ends"] = {str(k): v for k, v in self.ends.items()}
        return complete_mops(op.value, sent, reads, extra)
