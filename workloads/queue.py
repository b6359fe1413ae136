"""The queue workload (Jepsen's `jepsen.tests.kafka` queue), through confluent-kafka (librdkafka).

Producers send unique integers to key k (= partition k of the topic) and wait for the delivery
report; consumers `assign` keys and poll. Outcomes, following STYLE.md 10 (a timeout is never a
failure): a delivery report without error is `ok` with its offset; errors that prove nothing was
sent — unknown topic/partition, message too large, invalid argument, raised before any request
left — are `fail`; every other error (message timed out, not enough replicas after retries,
broker transport failures, an unknown producer id...) is `info`: the write may have happened.

`assign` follows Kafka's `KafkaConsumer.assign` as Jepsen's checker expects: keys that stay
assigned keep the consumer's position, only newly assigned keys start from the beginning.

A send op carries one to `MAX_SENDS_PER_OP` sends to random keys, produced together and awaited
together (one round trip, as Jepsen's multi-micro-op ops), so a handful of workers with one op in
flight each keeps every partition busy: the more acknowledged writes are in flight when a leader
dies, the more a replication mistake can lose. The op is `ok` only if every send was acknowledged,
`fail` only if every send certainly failed, `info` otherwise.

Each worker's ops come from its own stream `rng(seed, "workload", "queue", worker)`, so the
sequence of invocations per worker is a pure function of the seed (timing aside). The final drain
assigns every key and polls until each has been read up to the high watermark it had when the
drain began (the client reports those ends on the drain's polls).

`--sub-via` (Jepsen's): with `assign` every worker assigns keys itself; with `subscribe` it joins
the run's consumer group (`group_id(spec)`) with `subscribe()`, and the group's coordinator gives it
keys; with both, the workers are split between the modes by the seed. A subscribing worker:
- invokes `{"f": "subscribe", "value": [every key]}` first (and again as a fresh process after an
  `info`), completed `ok` with the same value;
- records on each poll's completion the rebalances that happened inside that poll call, in order,
  before its records were returned: `"rebalance-log": [{"revoked": [keys], "assigned": [keys]}, ...]`
  (librdkafka's eager protocol revokes everything, then assigns the new set: one entry each time);
- commits, synchronously after each poll, the next offset of every key the poll read and still
  holds; the acknowledged commits go on the poll's completion as `"commits": {"k": next offset}`,
  a refused or failed commit as `"commit-error"` (the poll's records stay `ok`: they were read);
- now and then (`REJOIN_FRACTION` of its ops, seeded) leaves the group and joins again: a
  `subscribe` op with `"rejoin": true`, which closes the consumer (LeaveGroup) and subscribes with
  a new one, so members come and go and the group rebalances even without faults. The old
  consumer's final revocation is on that op's completion as its `rebalance-log`.
The final drain stays `assign`-based, by a fresh process outside the group.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kernel.history import OpType
from kernel.node import Node
from kernel.rng import rng as seeded
from kernel.spec import RunSpec
from kernel.workload import ClientContext, Completion, Invocation, Workload

#: errors after which the message certainly was not written
DEFINITE_FAILURES = {
    KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError._MSG_TIMED_OUT_QUEUE if hasattr(KafkaError, "_MSG_TIMED_OUT_QUEUE") else -10_000,
    KafkaError._INVALID_ARG, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUIRED_ACKS,
}
#: consumer settings librdkafka's producer would warn about
CONSUMER_ONLY = {"enable.auto.commit", "auto.offset.reset", "session.timeout.ms", "fetch.wait.max.ms"}
SEND_TIMEOUT_MS = 5000
MAX_SENDS_PER_OP = 8
POLL_BATCH = 50
POLL_TIMEOUT_S = 0.5
FETCH_COMMITTED_TIMEOUT_S = 2.0  # an OffsetFetch that takes longer is left out of the op, not waited for
DRAIN_POLL_TIMEOUT_S = 1.0
#: how long the drain keeps asking for high watermarks while leadership settles after the heal
WATERMARK_PATIENCE_S = 60.0
WATERMARK_SETTLE_S = 1.0  # longer than a follower's fetch wait: one round of fetches moves a stale HW
#: the share of a subscribing worker's ops that leave the group and join it again
REJOIN_FRACTION = 0.02
#: how long a leaving member serves its revocation before it closes
LEAVE_TIMEOUT_S = 5.0

_quiet = logging.getLogger("chaos.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def group_id(spec: RunSpec) -> str:
    """The consumer group every subscribing worker of a run joins."""
    return f"chaos-{spec.name}-{spec.seed}"


def sub_via_of(spec: RunSpec, worker: int) -> str:
    """Worker `worker`'s mode: the modes of `--sub-via` in turn, from a seeded starting point, so
    with both modes the workers are split between them (half each, give or take one)."""
    first = seeded(spec.seed, "workload", "queue", "sub-via").randrange(len(spec.sub_via))
    return spec.sub_via[(worker + first) % len(spec.sub_via)]


class QueueGenerator:
    """Worker `worker`'s op stream: assign (or subscribe) first, then mostly sends and polls; now and
    then a re-assign (assign mode) or a leave-and-rejoin of the group (subscribe mode)."""

    def __init__(self, spec: RunSpec, worker: int) -> None:
        self.rng = seeded(spec.seed, "workload", "queue", "worker", worker)
        self.worker = worker
        self.partitions = spec.partitions
        self.subscribe = sub_via_of(spec, worker) == "subscribe"
        self.seq = 0
        self.started = False

    def _keys(self) -> list[int]:
        return sorted(self.rng.sample(range(self.partitions), k=self.rng.randint(1, self.partitions)))

    def next(self) -> Invocation:
        if not self.started:
            self.started = True
            if self.subscribe:
                return Invocation("subscribe", list(range(self.partitions)))
            return Invocation("assign", self._keys())
        x = self.rng.random()
        if x < 0.6:
            mops = []
            for _ in range(self.rng.randint(1, MAX_SENDS_PER_OP)):
                self.seq += 1
                mops.append(["send", self.rng.randrange(self.partitions), (self.worker + 1) * 1_000_000_000 + self.seq])
            return Invocation("send", mops)
        if self.subscribe:
            if x < 1 - REJOIN_FRACTION:
                return Invocation("poll", [["poll"]])
            return Invocation("subscribe", list(range(self.partitions)), {"rejoin": True})
        if x < 0.95:
            return Invocation("poll", [["poll"]])
        return Invocation("assign", self._keys())

    def update(self, op: Invocation, done: Completion) -> None:
        if self.subscribe and done.type is OpType.INFO:
            self.started = False  # the next process is a new consumer: it subscribes first


class FinalDrain:
    """After the heal: assign every key, then poll until every key is read up to its end."""

    def __init__(self, spec: RunSpec) -> None:
        self.keys = list(range(spec.partitions))
        self.assigned = False
        self.ends: dict[int, int] | None = None
        self.read_to: dict[int, int] = {}
        self.given_up = False

    def next(self) -> Invocation | None:
        if self.given_up:
            return None
        if not self.assigned:
            return Invocation("assign", self.keys, {"final": True})
        if self.ends is not None and all(self.read_to.get(k, 0) >= e for k, e in self.ends.items()):
            return None
        return Invocation("poll", [["poll"]], {"final": True})

    def update(self, op: Invocation, done: Completion) -> None:
        if done.type is not OpType.OK:
            self.given_up = True  # the drain is incomplete; the check says so
            return
        if op.f == "assign":
            self.assigned = True
            return
        ends = done.extra.get("ends")
        if ends is not None and self.ends is None:
            self.ends = {int(k): int(v) for k, v in ends.items()}
        for m in done.value:
            for k, pairs in (m[1] if len(m) > 1 else {}).items():
                if pairs:
                    self.read_to[int(k)] = max(self.read_to.get(int(k), 0), pairs[-1][0] + 1)


def sends_of(mops: list[list[Any]]) -> list[tuple[int, int]]:
    """The (key, value) of every send micro-op, in order."""
    return [(m[1], m[2]) for m in mops if m[0] == "send"]


def complete_mops(mops: list[list[Any]], sent: list[tuple[str, Any, str | None]], reads: list[dict[str, Any]],
                  extra: dict[str, Any]) -> Completion:
    """Fold one op's micro-op outcomes into its completion. `sent` holds (outcome, offset, error) per
    send micro-op and `reads` what each poll micro-op read, both in order. Like Jepsen's: ok when
    every micro-op happened (a poll always did), fail when every one certainly did not, otherwise
    info. Shared by the container client and the simulator's, so both record the same history."""
    sends, polls = iter(sent), iter(reads)
    out: list[list[Any]] = []
    outcomes: list[str] = []
    errors: list[str] = []
    for m in mops:
        if m[0] == "send":
            typ, offset, err = next(sends)
            outcomes.append(typ)
            if err:
                errors.append(err)
            out.append(["send", m[1], [offset, m[2]]] if typ == "ok" else m)
        else:
            out.append(["poll", next(polls)])
            outcomes.append("ok")
    if all(o == "ok" for o in outcomes):
        return Completion(OpType.OK, out, extra)
    if all(o == "fail" for o in outcomes):
        return Completion(OpType.FAIL, mops, {"error": "; ".join(errors)})
    return Completion(OpType.INFO, mops, {"error": "; ".join(errors)})


def _collect_into(box: list[tuple[Any, Any]]) -> Any:
    """A delivery callback that keeps (error, message) in `box`."""

    def on_delivery(err: Any, msg: Any) -> None:
        box.append((err, msg))

    return on_delivery


class QueueClient:
    """One process's connection: a producer and a consumer, reopened when the process is retired."""

    def __init__(self, ctx: ClientContext) -> None:
        self.ctx = ctx
        self.topic = ctx.spec.topic
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.assigned: set[int] = set()
        self.ends: dict[int, int] | None = None
        self.common: dict[str, Any] = {}
        self.subscribed = False  # the consumer is a member of the run's group (subscribe mode)
        self.rebalances: list[dict[str, list[int]]] = []  # since the last poll began

    def open(self, node: Node) -> None:
        self.connect(self.ctx.address_of(node))

    def connect(self, bootstrap: str) -> None:
        spec = self.ctx.spec
        self.common = {"bootstrap.servers": bootstrap, "logger": _quiet, "socket.timeout.ms": 3000,
                       "metadata.max.age.ms": 2000, "topic.metadata.refresh.interval.ms": 1000,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                       "fetch.wait.max.ms": 100}
        self.producer = Producer({k: v for k, v in self.common.items() if k not in CONSUMER_ONLY}
                                 | {"acks": "all" if spec.acks in ("all", "-1") else spec.acks,
                                    "enable.idempotence": spec.idempotence, "message.timeout.ms": SEND_TIMEOUT_MS,
                                    "request.timeout.ms": 3000, "linger.ms": 0})
        self.consumer = Consumer({**self.common, "group.id": f"chaos-{self.ctx.process}"})

    def invoke(self, op: Invocation) -> Completion:
        try:
            if op.f == "assign":
                self.assign(list(op.value))
                return Completion(OpType.OK, op.value)
            if op.f == "subscribe":
                log = self.subscribe()
                return Completion(OpType.OK, op.value, {"rebalance-log": log} if log else {})
            final = bool(op.extra.get("final"))
            return self._mops(op, final)
        except Exception as e:  # we do not know what happened: info, never fail
            return Completion(OpType.INFO, op.value, {"error": f"{type(e).__name__}: {e}"})

    # --- subscribe mode ------------------------------------------------------------------------------
    def subscribe(self) -> list[dict[str, list[int]]]:
        """Join the run's group with a new consumer (leaving first, if this one is a member or
        assigned keys itself); returns the rebalances the old consumer saw while it closed."""
        self.rebalances = []
        self._close_consumer()
        gone = self.rebalances
        self.rebalances, self.assigned = [], set()
        self.consumer = Consumer({**self.common, "group.id": group_id(self.ctx.spec), "heartbeat.interval.ms": 1000,
                                  "max.poll.interval.ms": 15000, "partition.assignment.strategy": "range"})
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.subscribed = True
        return gone

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

    def commit(self, read: dict[str, list[list[int]]]) -> dict[str, Any]:
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

    def fetch_committed(self) -> dict[str, Any]:
        """The group's committed offsets of the keys this consumer holds, asked of the coordinator
        before the poll reads or commits: the direct evidence of a commit the coordinator lost
        (`results/commits.py`, `lost-commit`). A lost commit is usually overwritten by the next one
        before a rebalance hands its key to anybody, so the first reads after a rebalance alone
        rarely show it; a consumer asking for its own last commit does, at its next poll."""
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

    def _mops(self, op: Invocation, final: bool) -> Completion:
        extra: dict[str, Any] = {}
        sent = self.send_many(sends_of(op.value))
        reads: list[dict[str, Any]] = []
        for m in op.value:
            if m[0] == "send":
                continue
            if final and self.ends is None:
                self.ends = self.high_watermarks(sorted(self.assigned))
            self.rebalances = []
            if self.subscribed and not final:
                extra.update(self.fetch_committed())
            read = self.poll(DRAIN_POLL_TIMEOUT_S if final else POLL_TIMEOUT_S)
            reads.append(read)
            if self.subscribed:
                if self.rebalances:
                    extra["rebalance-log"] = self.rebalances
                extra.update(self.commit(read))
        if final and self.ends is not None:
            extra["ends"] = {str(k): v for k, v in self.ends.items()}
        return complete_mops(op.value, sent, reads, extra)

    def send(self, key: int, value: int) -> tuple[str, Any, str | None]:
        return self.send_many([(key, value)])[0]

    def send_many(self, sends: list[tuple[int, int]]) -> list[tuple[str, Any, str | None]]:
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

    def poll(self, timeout: float = POLL_TIMEOUT_S) -> dict[str, list[list[int]]]:
        assert self.consumer is not None, "open() first"
        out: dict[str, list[list[int]]] = {}
        for m in self.consumer.consume(POLL_BATCH, timeout):
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise KafkaException(err)
                continue
            offset, value = m.offset(), m.value()
            if offset is None or value is None:
                raise KafkaException(f"a record without an offset or value on partition {m.partition()}")
            out.setdefault(str(m.partition()), []).append([offset, int(value)])
        return out

    def high_watermarks(self, keys: list[int]) -> dict[int, int]:
        """Each key's high watermark once it has settled: read again every WATERMARK_SETTLE_S until
        two readings agree. A leader that has just taken over or restarted serves an HW behind what
        its followers hold (its checkpoint, or the last one a leader sent it) until they fetch again;
        a drain that took that as the end would stop short and call acknowledged records unseen
        (the simulator's seed 5077 did). The workers have stopped, so only that catching up moves it."""
        last = self._watermarks_once(keys)
        deadline = time.monotonic() + WATERMARK_PATIENCE_S
        while time.monotonic() < deadline:
            time.sleep(WATERMARK_SETTLE_S)
            now = self._watermarks_once(keys)
            if now == last:
                break
            last = now
        return last

    def _watermarks_once(self, keys: list[int]) -> dict[int, int]:
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
            self.producer.flush(0)
            self.producer = None


WORKLOAD = Workload(
    name="queue",
    client_factory=QueueClient,
    generator=QueueGenerator,
    final_generator=FinalDrain,
    description="Jepsen's Kafka queue: unique values sent with acks, consumers assign and poll, a final drain",
)
