"""The queue workload (Jepsen's `jepsen.tests.kafka` queue).

Producers send unique integers to key k (= partition k of the topic) and wait for the delivery
report; consumers `assign` keys and poll. The client's op logic (`QueueClient`) is written once;
its Kafka calls go through the backend's `KafkaConnection` (`kafka.py`): librdkafka in containers
(`librdkafka.py`, which says how its errors become outcomes), the simulated client in the
simulator. Outcomes follow STYLE.md 10: a timeout is never a failure.

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

import asyncio
from typing import Any

from kernel.history import OpType
from kernel.node import Node
from kernel.rng import rng as seeded
from kernel.spec import RunSpec
from kernel.workload import ClientContext, Completion, Invocation, Workload
from workloads.kafka import KafkaConnection, Read

MAX_SENDS_PER_OP = 8
POLL_TIMEOUT_S = 0.5
DRAIN_POLL_TIMEOUT_S = 1.0
#: how long the drain waits for the high watermarks to settle after the heal
WATERMARK_PATIENCE_S = 60.0
WATERMARK_SETTLE_S = 1.0  # longer than a follower's fetch wait: one round of fetches moves a stale HW
#: the share of a subscribing worker's ops that leave the group and join it again
REJOIN_FRACTION = 0.02


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


class QueueClient:
    """One process's op logic over the backend's Kafka connection (opened by `open`)."""

    def __init__(self, ctx: ClientContext) -> None:
        self.ctx = ctx
        self.k: KafkaConnection | None = None
        self.assigned: set[int] = set()
        self.subscribed = False
        self.ends: dict[int, int] | None = None

    def open(self, node: Node) -> None:
        self.k = self.ctx.connect(self.ctx, node)

    async def invoke(self, op: Invocation) -> Completion:
        assert self.k is not None, "open() first"
        try:
            if op.f == "assign":
                self.k.assign(list(op.value))
                self.assigned = set(op.value)
                return Completion(OpType.OK, op.value)
            if op.f == "subscribe":
                log = await self.k.subscribe(group_id(self.ctx.spec))
                self.subscribed = True
                return Completion(OpType.OK, op.value, {"rebalance-log": log} if log else {})
            return await self._mops(op, bool(op.extra.get("final")))
        except Exception as e:  # we do not know what happened: info, never fail
            return Completion(OpType.INFO, op.value, {"error": f"{type(e).__name__}: {e}"})

    async def _mops(self, op: Invocation, final: bool) -> Completion:
        assert self.k is not None
        extra: dict[str, Any] = {}
        sent = await self.k.send_many(sends_of(op.value))
        reads: list[Read] = []
        for m in op.value:
            if m[0] == "send":
                continue
            if final and self.ends is None:
                self.ends = await self.settled_watermarks(sorted(self.assigned))
            self.k.take_rebalances()
            if self.subscribed and not final:
                extra.update(await self.k.fetch_committed())
            read = await self.k.poll(DRAIN_POLL_TIMEOUT_S if final else POLL_TIMEOUT_S)
            reads.append(read)
            if self.subscribed:
                rebalances = self.k.take_rebalances()
                if rebalances:
                    extra["rebalance-log"] = rebalances
                extra.update(await self.k.commit(read))
        if final and self.ends is not None:
            extra["ends"] = {str(k): v for k, v in self.ends.items()}
        return complete_mops(op.value, sent, reads, extra)

    async def settled_watermarks(self, keys: list[int]) -> dict[int, int]:
        """Each key's high watermark once it has settled: read again every WATERMARK_SETTLE_S until
        two readings agree. A leader that has just taken over or restarted serves an HW behind what
        its followers hold (its checkpoint, or the last one a leader sent it) until they fetch again;
        a drain that took that as the end would stop short and call acknowledged records unseen
        (the simulator's seed 5077 did). The workers have stopped, so only that catching up moves it."""
        assert self.k is not None
        loop = asyncio.get_running_loop()
        last = await self.k.watermarks(keys)
        deadline = loop.time() + WATERMARK_PATIENCE_S
        while loop.time() < deadline:
            await asyncio.sleep(WATERMARK_SETTLE_S)
            now = await self.k.watermarks(keys)
            if now == last:
                break
            last = now
        return last

    def close(self) -> None:
        if self.k is not None:
            self.k.close()
            self.k = None


WORKLOAD = Workload(
    name="queue",
    client_factory=QueueClient,
    generator=QueueGenerator,
    final_generator=FinalDrain,
    description="Jepsen's Kafka queue: unique values sent with acks, consumers assign and poll, a final drain",
)
