"""`Librdkafka`: the queue workload's `KafkaConnection` in containers — a confluent-kafka (librdkafka)
producer and consumer, reopened when the process is retired.

Outcomes, following STYLE.md 10 (a timeout is never a failure): a delivery report without error is
`ok` with its offset; errors that prove nothing was sent — unknown topic/partition, message too
large, invalid argument, raised before any request left — are `fail`; every other error (message
timed out, not enough replicas after retries, broker transport failures, an unknown producer id...)
is `info`: the write may have happened. Its coroutines never await: they run on their worker's own
thread (`harness/runtime.py`) and block it, as librdkafka's calls do.

Subscribe mode: the consumer joins the group with `subscribe()`, librdkafka's eager protocol
revokes everything and assigns the new set inside a poll (one `{"revoked", "assigned"}` entry each
time, `take_rebalances`); commits are synchronous after each poll.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kernel.node import Node
from kernel.workload import ClientContext
from workloads.kafka import Read, Rebalance

#: errors after which the message certainly was not written
DEFINITE_FAILURES = {
    KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError._MSG_TIMED_OUT_QUEUE if hasattr(KafkaError, "_MSG_TIMED_OUT_QUEUE") else -10_000,
    KafkaError._INVALID_ARG, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUIRED_ACKS,
}
#: consumer settings librdkafka's producer would warn about
CONSUMER_ONLY = {"enable.auto.commit", "auto.offset.reset", "session.timeout.ms", "fetch.wait.max.ms"}
SEND_TIMEOUT_MS = 5000
POLL_BATCH = 50
FETCH_COMMITTED_TIMEOUT_S = 2.0  # an OffsetFetch that takes longer is left out of the op, not waited for
#: how long the drain keeps asking for high watermarks while leadership settles after the heal
WATERMARK_PATIENCE_S = 60.0
#: how long a leaving member serves its revocation before it closes
LEAVE_TIMEOUT_S = 5.0

_quiet = logging.getLogger("chaos.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def connect(ctx: ClientContext, node: Node) -> Librdkafka:
    """The container backend's `Connect`: librdkafka bootstrapping from `node`."""
    return Librdkafka(ctx, ctx.address_of(node))


def _collect_into(box: list[tuple[Any, Any]]) -> Any:
    """A delivery callback that keeps (error, message) in `box`."""

    def on_delivery(err: Any, msg: Any) -> None:
        box.append((err, msg))

    return on_delivery



class Librdkafka:
    """One process's producer and consumer (`workloads.kafka.KafkaConnection`)."""

    def __init__(self, ctx: ClientContext, bootstrap: str) -> None:
        self.ctx = ctx
        self.topic = ctx.spec.topic
        self.assigned: set[int] = set()
        self.subscribed = False  # the consumer is a member of a group (subscribe mode)
        self.rebalances: list[Rebalance] = []  # since `take_rebalances` last took them
        spec = ctx.spec
        self.common: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "logger": _quiet, "socket.timeout.ms": 3000,
            "metadata.max.age.ms": 2000, "topic.metadata.refresh.interval.ms": 1000, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "fetch.wait.max.ms": 100}
        self.producer: Producer | None = Producer(
            {k: v for k, v in self.common.items() if k not in CONSUMER_ONLY}
            | {"acks": "all" if spec.acks in ("all", "-1") else spec.acks, "enable.idempotence": spec.idempotence,
               "message.timeout.ms": SEND_TIMEOUT_MS, "request.timeout.ms": 3000, "linger.ms": 0})
        self.consumer: Consumer | None = Consumer({**self.common, "group.id": f"chaos-{ctx.process}"})

    # --- subscribe mode ------------------------------------------------------------------------------
    async def subscribe(self, group: str) -> list[Rebalance]:
        self.rebalances = []
        self._close_consumer()
        gone = self.take_rebalances()
        self.assigned = set()
        self.consumer = Consumer({**self.common, "group.id": group, "heartbeat.interval.ms": 1000,
                                  "max.poll.interval.ms": 15000, "partition.assignment.strategy": "range"})
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.subscribed = True
        return gone

    def take_rebalances(self) -> list[Rebalance]:
        got, self.rebalances = self.rebalances, []
        return got

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        keys = sorted(tp.partition for tp in partitions)
        self.assigned -= set(keys)
        self.rebalances.append({"revoked": keys, "assigned": []})

    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        keys = sorted(tp.partition for tp in partitions)
        self.assigned |= set(keys)
        last = self.rebalances[-1] if self.rebalances else None
        if last is not None and not last["assigned"]:
            last["assigned"] = keys  # the eager protocol's revoke-then-assign: one rebalance
        else:
            self.rebalances.append({"revoked": [], "assigned": keys})

    async def commit(self, read: Read) -> dict[str, Any]:
        """Commit the next offset of every key `read` holds that is still assigned; the extra fields
        of the poll's completion: `commits` (acknowledged), `commit-error` (refused or unknown)."""
        assert self.consumer is not None, "open() first"
        nxt = {int(k): pairs[-1][0] + 1 for k, pairs in read.items() if pairs and int(k) in self.assigned}
        if not nxt:
            return {}
        try:
            done = self.consumer.commit(offsets=[TopicPartition(self.topic, k, o) for k, o in sorted(nxt.items())],
                                        asynchronous=False)
        except KafkaException as e:
            return {"commit-error": str(e.args[0] if e.args else e)}
        acked = {str(tp.partition): tp.offset for tp in done or [] if tp.error is None}
        errors = [f"{tp.partition}: {tp.error}" for tp in done or [] if tp.error is not None]
        return {"commits": acked} | ({"commit-error": "; ".join(errors)} if errors else {})

    async def fetch_committed(self) -> dict[str, Any]:
        assert self.consumer is not None, "open() first"
        if not self.assigned:
            return {}
        try:
            got = self.consumer.committed([TopicPartition(self.topic, k) for k in sorted(self.assigned)],
                                          timeout=FETCH_COMMITTED_TIMEOUT_S)
        except KafkaException:
            return {}
        fetched = {str(tp.partition): tp.offset for tp in got if tp.error is None and tp.offset >= 0}
        return {"fetched-commits": fetched} if fetched else {}

    async def send_many(self, sends: list[tuple[int, int]]) -> list[tuple[str, Any, str | None]]:
        """Produce every (key, value), then wait once for all delivery reports: (outcome, offset, error)."""
        if not sends:
            return []
        assert self.producer is not None, "open() first"
        reports: list[list[tuple[Any, Any]]] = [[] for _ in sends]
        refused: dict[int, str] = {}
        for i, (key, value) in enumerate(sends):
            try:
                self.producer.produce(self.topic, str(value).encode(), partition=key,
                                      on_delivery=_collect_into(reports[i]))
            except (BufferError, KafkaException) as e:  # refused before sending anything
                refused[i] = str(e)
        self.producer.flush(SEND_TIMEOUT_MS / 1000 + 2)
        out: list[tuple[str, Any, str | None]] = []
        for i, box in enumerate(reports):
            if i in refused:
                out.append(("fail", None, refused[i]))
            elif not box:
                out.append(("info", None, "no delivery report in time"))
            elif box[0][0] is None:
                out.append(("ok", box[0][1].offset(), None))
            elif box[0][0].code() in DEFINITE_FAILURES:
                out.append(("fail", None, box[0][0].str()))
            else:
                out.append(("info", None, box[0][0].str()))
        return out

    def assign(self, keys: list[int]) -> None:
        """Kafka's assign: retained keys keep their position, new keys start at the beginning."""
        assert self.consumer is not None, "open() first"
        want = set(keys)
        gone, new = self.assigned - want, want - self.assigned
        if gone:
            self.consumer.incremental_unassign([TopicPartition(self.topic, k) for k in sorted(gone)])
        if new:
            self.consumer.incremental_assign([TopicPartition(self.topic, k, OFFSET_BEGINNING) for k in sorted(new)])
        self.assigned = want

    async def poll(self, timeout_s: float) -> Read:
        assert self.consumer is not None, "open() first"
        out: dict[str, list[list[int]]] = {}
        for m in self.consumer.consume(POLL_BATCH, timeout_s):
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise KafkaException(err)
                # an offset reset, a truncation librdkafka detected, a broker down: kept in the run's
                # clients.log (harness/client_log.py), since the history alone cannot say why a
                # position moved
                _quiet.warning("process %s consumer: %s (partition %s)", self.ctx.process, err, m.partition())
                continue
            offset, value = m.offset(), m.value()
            if offset is None or value is None:
                raise KafkaException(f"a record without an offset or value on partition {m.partition()}")
            out.setdefault(str(m.partition()), []).append([offset, int(value)])
        return out

    async def watermarks(self, keys: list[int]) -> dict[int, int]:
        """Asking again while leadership settles: a leader can still move after the recovery wait
        (a reassignment finishing, a preferred election), and the client's metadata catches up only
        after a NOT_LEADER answer."""
        assert self.consumer is not None, "open() first"
        deadline = time.monotonic() + WATERMARK_PATIENCE_S
        while True:
            try:
                return {k: self.consumer.get_watermark_offsets(TopicPartition(self.topic, k), timeout=5)[1]
                        for k in keys}
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _close_consumer(self) -> None:
        """A member of the group leaves (`_leave_group`) and is then dropped, never `close()`d:
        confluent-kafka runs `close()`'s rebalance callback and then librdkafka's `assign()` with the
        GIL held, and during a terminating group that assign can wait forever — the whole harness
        froze (seed 7, `--sub-via subscribe`, default mix: every worker, the nemesis and Ctrl-C
        stopped at once; gdb showed a worker in Consumer_close -> rebalance_cb -> rd_kafka_assign).
        Dropping the last reference destroys the handle without a consumer close, with the GIL
        released; the LeaveGroup was sent by `unsubscribe()`, and there are no offsets to commit
        (auto-commit is off). An `assign`-mode consumer has no rebalance callbacks and is closed."""
        if self.consumer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                if self.subscribed:
                    self._leave_group()
                else:
                    self.consumer.close()
            self.consumer = None
        self.subscribed = False

    def _leave_group(self) -> None:
        """Unsubscribe (LeaveGroup) and serve the revocation through ordinary `consume()` calls, so the
        history's rebalance log has it; bounded, since a partitioned coordinator may never answer."""
        assert self.consumer is not None
        self.consumer.unsubscribe()  # LeaveGroup; the revocation is served by the next consume()
        deadline = time.monotonic() + LEAVE_TIMEOUT_S
        while self.consumer.assignment() and time.monotonic() < deadline:
            self.consumer.consume(POLL_BATCH, 0.1)  # records read here are dropped: no op returns them

    def close(self) -> None:
        self._close_consumer()
        if self.producer is not None:
            # a producer in a fatal state (fenced, or a transaction the broker refused to end:
            # INVALID_TXN_STATE) raises its error here; it is dropped all the same. Raising crashed the
            # worker that retired it, and a crashed worker makes the whole run unknown
            with contextlib.suppress(KafkaException):
                self.producer.flush(0)
            self.producer = None


