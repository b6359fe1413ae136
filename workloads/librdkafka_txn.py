"""`LibrdkafkaTxn`: the transactional workload's `TxnConnection` in containers — the queue workload's
librdkafka connection with a transactional producer (`transactional.id` per process) and a
read_committed consumer.

Outcomes, by librdkafka's documented transactional error handling: `commit_transaction` returning
is `committed`, `abort_transaction` returning is `aborted`; an error that "requires abort" (a failed
produce inside the transaction, a refused AddPartitionsToTxn) is answered with an abort, and the
transaction is `aborted` if that abort is acknowledged; a fatal error (fenced) or a commit whose
answer never came is `unknown` — the worker then retires the process and its producer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kernel.node import Node
from kernel.workload import ClientContext, TxnSettings
from workloads.librdkafka import CONSUMER_ONLY, Librdkafka, _collect_into

#: seconds a transactional call (init, commit, abort) may take before its outcome is unknown
TXN_CALL_TIMEOUT_S = 15.0
INIT_RETRY_S = 0.5


def connect_with(txn: TxnSettings) -> Callable[[ClientContext, Node], LibrdkafkaTxn]:
    """The container backend's `Connect` for a transactional workload."""

    def connect(ctx: ClientContext, node: Node) -> LibrdkafkaTxn:
        return LibrdkafkaTxn(ctx, ctx.address_of(node), txn)

    return connect


def _error(e: KafkaException) -> Any:
    return e.args[0] if e.args else None


class LibrdkafkaTxn(Librdkafka):
    def __init__(self, ctx: ClientContext, bootstrap: str, txn: TxnSettings) -> None:
        super().__init__(ctx, bootstrap)
        self.common["isolation.level"] = "read_committed"
        if self.consumer is not None:
            self.consumer.close()
        self.consumer = Consumer({**self.common, "group.id": f"chaos-{ctx.process}"})
        common = {k: v for k, v in self.common.items() if k not in CONSUMER_ONLY | {"isolation.level"}}
        self.producer = Producer(common | {
            "transactional.id": txn.id_of(ctx.spec, ctx.process), "transaction.timeout.ms": txn.timeout_ms,
            "message.timeout.ms": txn.produce_timeout_ms, "request.timeout.ms": 3000, "linger.ms": 0})
        self.initialized = False
        self.reports: list[list[tuple[Any, Any]]] = []

    async def begin(self) -> None:
        assert self.producer is not None, "open() first"
        if not self.initialized:
            self._init()
            self.initialized = True
        self.producer.begin_transaction()
        self.reports = []

    def _init(self) -> None:
        """init_transactions, called again after a retriable error as librdkafka documents: while the
        transaction log is being created or a coordinator is moving, InitProducerId is answered
        NOT_COORDINATOR and librdkafka gives up on it (a ctp run's first transactions all ended
        `info` on it). A fatal error, or no success by `TXN_CALL_TIMEOUT_S`, raises: the op is info."""
        assert self.producer is not None
        deadline = time.monotonic() + TXN_CALL_TIMEOUT_S
        while True:
            try:
                self.producer.init_transactions(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as e:
                err = _error(e)
                if err is None or err.fatal() or time.monotonic() > deadline:
                    raise
                time.sleep(INIT_RETRY_S)

    def send(self, key: int, value: int) -> None:
        assert self.producer is not None, "open() first"
        box: list[tuple[Any, Any]] = []
        self.reports.append(box)
        try:
            self.producer.produce(self.topic, str(value).encode(), partition=key, on_delivery=_collect_into(box))
        except (BufferError, KafkaException) as e:  # refused before sending: the commit will be refused too
            box.append((e, None))

    async def end(self, commit: bool, offsets: dict[int, int] | None = None) -> tuple[str, list[int | None], str]:
        assert self.producer is not None, "open() first"
        try:
            if offsets and self.consumer is not None:
                self.producer.send_offsets_to_transaction(
                    [TopicPartition(self.topic, k, o) for k, o in sorted(offsets.items())],
                    self.consumer.consumer_group_metadata(), TXN_CALL_TIMEOUT_S)
            if commit:
                self.producer.commit_transaction(TXN_CALL_TIMEOUT_S)
                return "committed", self._offsets(), ""
            self.producer.abort_transaction(TXN_CALL_TIMEOUT_S)
            return "aborted", [None] * len(self.reports), ""
        except KafkaException as e:
            err = _error(e)
            why = str(err.str() if err is not None else e)
            if not commit:  # no commit was ever asked for: the coordinator aborts it, at the latest on timeout
                return "aborted", [None] * len(self.reports), why
            if err is not None and err.txn_requires_abort() and not err.fatal():
                try:
                    self.producer.abort_transaction(TXN_CALL_TIMEOUT_S)
                    return "aborted", [None] * len(self.reports), why
                except KafkaException as e2:
                    why = f"{why}; abort: {e2}"
            return "unknown", [None] * len(self.reports), why

    def _offsets(self) -> list[int | None]:
        """Each send's offset from its delivery report (the commit flushed them all)."""
        assert self.producer is not None
        self.producer.poll(0)  # serve the delivery callbacks still queued
        return [box[0][1].offset() if box and box[0][0] is None and box[0][1] is not None else None
                for box in self.reports]

    async def positions(self, keys: list[int]) -> dict[int, int]:
        assert self.consumer is not None, "open() first"
        got = self.consumer.position([TopicPartition(self.topic, k) for k in keys])
        return {tp.partition: tp.offset for tp in got if tp.error is None and tp.offset >= 0}

    def rewind(self, to: dict[int, int]) -> None:
        assert self.consumer is not None, "open() first"
        for k, offset in sorted(to.items()):
            if k in self.assigned:
                with contextlib.suppress(KafkaException):  # revoked meanwhile: its next owner starts over
                    self.consumer.seek(TopicPartition(self.topic, k, offset))

    def held(self) -> list[int]:
        return sorted(self.assigned)
