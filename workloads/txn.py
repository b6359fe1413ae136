"""The transactional workload (Jepsen's `:txn` in `jepsen.tests.kafka`): `chaos run --workload txn`.

Each op is one transaction, `{"f": "txn", "value": [["send", k, v] | ["poll"], ...]}`: seeded sends
to several keys and polls, in the order the generator drew them, then a commit — or, for a seeded
share of them (`ABORT_FRACTION`), an abort on purpose (`"abort": true` on the op). The producer is
transactional (a `transactional.id` per process), the consumer reads with
`isolation_level=read_committed`, so a poll returns only records of committed transactions.

How a transaction ends in the history (Jepsen's rules, kernel/history/README.md):
- committed: `ok`, each send with the offset it got, each poll with what it read;
- aborted (on purpose, or because a step failed and the abort was acknowledged): `fail`, carrying
  what its polls read (an aborted read, G1a, is a value of such a transaction read by anyone). As an
  exactly-once consumer does, the process then rewinds its consumer to where the transaction began
  reading, so it reads those records again: what an aborted transaction read was never consumed
  (without the rewind every abort that polled is a poll-skip in the next transaction);
- unknown (the commit's answer never came, the producer was fenced): `info`, polls with what they
  read; the process is retired and a fresh one — a new transactional id — takes its place.

Its Kafka calls go through the backend's `TxnConnection` (written once for both backends): a
confluent-kafka transactional producer in containers (`librdkafka_txn.py`), the simulator's
transactional client (`logsim.txn_client.SimTxnProducer`) there. Assign and subscribe ops, plain
polls and the final drain are the queue workload's (`queue.QueueClient`), over the same
read_committed consumer; `--sub-via` works as there.

`--txn-mode ctp` (consume-transform-produce, Kafka Streams' exactly-once loop): each transaction
first polls, then sends, and commits the consumer's next offsets inside the transaction
(`send_offsets_to_transaction`); the acknowledged offsets go on the completion as `"commits"`.
It needs a consumer group, so it runs only with `--sub-via subscribe`.
"""

from __future__ import annotations

from typing import Any, Protocol

from kernel.history import OpType
from kernel.rng import rng as seeded
from kernel.spec import RunSpec
from kernel.workload import Completion, Invocation, TxnSettings, Workload
from workloads.kafka import KafkaConnection, Read
from workloads.queue import POLL_TIMEOUT_S, FinalDrain, QueueClient, sub_via_of

#: micro-ops per transaction (Jepsen's `:max-txn-length` is 4)
MAX_TXN_LENGTH = 4
#: the share of transactions aborted on purpose
ABORT_FRACTION = 0.2
#: the transaction timeout both backends' producers ask for: a retired process's open transaction
#: is aborted by its coordinator after this long, and the partitions' LSO moves on
TXN_TIMEOUT_MS = 10_000
#: how long a transaction's writes are tried before the producer aborts it (librdkafka's
#: message.timeout.ms, which must not exceed the transaction timeout)
PRODUCE_TIMEOUT_MS = 5_000


class TxnConnection(KafkaConnection, Protocol):
    """The queue workload's connection, with a transactional producer and a read_committed consumer."""

    async def begin(self) -> None:
        """Start a transaction (initializing the producer first, once); raises when it cannot."""
        ...

    def send(self, key: int, value: int) -> None:
        """Produce (key, value) inside the transaction; its outcome comes with `end`."""
        ...

    async def end(self, commit: bool, offsets: dict[int, int] | None = None) -> tuple[str, list[int | None], str]:
        """Commit (or abort) the transaction, first adding the consumer's `offsets` to it (ctp):
        the outcome (`committed`, `aborted` or `unknown`), the offset of each send in order (None
        where unknown), and what went wrong ('' when nothing)."""
        ...

    async def positions(self, keys: list[int]) -> dict[int, int]:
        """The consumer's next offset on each key it has a position on."""
        ...

    def held(self) -> list[int]:
        """The keys the consumer holds now (assigned by hand, or by the group)."""
        ...

    def rewind(self, to: dict[int, int]) -> None:
        """Move the consumer back to offset `to[k]` on each key k it still holds (what an aborted
        transaction read is read again)."""
        ...


def transactional_id(spec: RunSpec, process: int) -> str:
    """One transactional id per process: a retired process's id is never used again."""
    return f"chaos-{spec.name}-{spec.seed}-{process}"


class TxnGenerator:
    """Worker `worker`'s op stream: assign (or subscribe) first, then transactions."""

    def __init__(self, spec: RunSpec, worker: int) -> None:
        self.rng = seeded(spec.seed, "workload", "txn", "worker", worker)
        self.worker = worker
        self.partitions = spec.partitions
        self.subscribe = sub_via_of(spec, worker) == "subscribe"
        self.ctp = spec.txn_mode == "ctp"
        self.seq = 0
        self.started = False

    def _send(self) -> list[Any]:
        self.seq += 1
        return ["send", self.rng.randrange(self.partitions), (self.worker + 1) * 1_000_000_000 + self.seq]

    def next(self) -> Invocation:
        if not self.started:
            self.started = True
            if self.subscribe:
                return Invocation("subscribe", list(range(self.partitions)))
            return Invocation("assign", list(range(self.partitions)))
        n = self.rng.randint(1, MAX_TXN_LENGTH)
        if self.ctp:
            mops = [["poll"], *(self._send() for _ in range(max(1, n - 1)))]
        else:
            mops = [self._send() if self.rng.random() < 0.5 else ["poll"] for _ in range(n)]
        abort = self.rng.random() < ABORT_FRACTION
        return Invocation("txn", mops, {"abort": True} if abort else {})

    def update(self, op: Invocation, done: Completion) -> None:
        if done.type is OpType.INFO:
            self.started = False  # a fresh process: a new consumer assigns (or subscribes) again


class TxnDrain(FinalDrain):
    """The queue workload's drain, done when the read_committed consumer's position on every key has
    reached the end the drain began with (its last records are markers, which no poll returns)."""

    def update(self, op: Invocation, done: Completion) -> None:
        super().update(op, done)
        for k, pos in (done.extra.get("positions") or {}).items():
            self.read_to[int(k)] = max(self.read_to.get(int(k), 0), int(pos))


class TxnClient(QueueClient):
    """One process's op logic: transactions here, everything else the queue client's."""

    k: TxnConnection | None  # type: ignore[assignment]

    async def invoke(self, op: Invocation) -> Completion:
        if op.f != "txn":
            done = await super().invoke(op)
            if op.extra.get("final") and op.f == "poll" and done.type is OpType.OK and self.k is not None:
                pos = {str(k): v for k, v in (await self.k.positions(sorted(self.assigned))).items()}
                return Completion(done.type, done.value, {**done.extra, "positions": pos})
            return done
        try:
            return await self._txn(op)
        except Exception as e:  # we do not know what happened: info, never fail
            return Completion(OpType.INFO, op.value, {"error": f"{type(e).__name__}: {e}"})

    async def _txn(self, op: Invocation) -> Completion:
        assert self.k is not None, "open() first"
        await self.k.begin()
        reads: list[Read] = []
        extra: dict[str, Any] = {}
        for m in op.value:
            if m[0] == "send":
                self.k.send(m[1], m[2])
                continue
            self.k.take_rebalances()
            read = await self.k.poll(POLL_TIMEOUT_S)
            reads.append(read)
            if self.subscribed and (rebalances := self.k.take_rebalances()):
                extra["rebalance-log"] = rebalances
        offsets = None
        if self.ctx.spec.txn_mode == "ctp" and self.subscribed:
            offsets = await self.k.positions(self.k.held())
        outcome, sent, error = await self.k.end(not op.extra.get("abort"), offsets)
        if error:
            extra["error"] = error
        if outcome == "committed" and offsets:
            extra["commits"] = {str(k): v for k, v in sorted(offsets.items())}
        if outcome == "aborted":
            self.k.rewind(first_offsets(reads))
        return complete_txn(op.value, outcome, sent, reads, extra)


def first_offsets(reads: list[Read]) -> dict[int, int]:
    """The first offset each key was read at across a transaction's polls."""
    out: dict[int, int] = {}
    for read in reads:
        for k, pairs in read.items():
            if pairs:
                out[int(k)] = min(out.get(int(k), pairs[0][0]), pairs[0][0])
    return out


def complete_txn(mops: list[list[Any]], outcome: str, offsets: list[int | None], reads: list[Read],
                 extra: dict[str, Any]) -> Completion:
    """A transaction's completion (see the module docstring): every type carries what its polls read;
    a committed one's sends carry their offsets."""
    sends, polls = iter(offsets), iter(reads)
    out: list[list[Any]] = []
    for m in mops:
        if m[0] == "send":
            offset = next(sends)
            out.append(["send", m[1], [offset, m[2]]] if outcome == "committed" and offset is not None else m)
        else:
            out.append(["poll", next(polls)])
    typ = {"committed": OpType.OK, "aborted": OpType.FAIL}.get(outcome, OpType.INFO)
    return Completion(typ, out, extra)


WORKLOAD = Workload("txn", TxnClient, TxnGenerator, TxnDrain,
                    "Jepsen's :txn: transactions of sends and polls, committed or aborted by seed, "
                    "read_committed consumers", transactional=TxnSettings(TXN_TIMEOUT_MS, PRODUCE_TIMEOUT_MS,
                                                                          transactional_id))
