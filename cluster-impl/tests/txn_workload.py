"""Transactions through real clients, for the end-to-end tests on real broker processes.

Transactional producers of two libraries (confluent-kafka, i.e. librdkafka; aiokafka) each run
numbered transactions in a thread of their own — every fourth one aborted on purpose — and record
each transaction's outcome as the client reported it: `committed`, `aborted`, or `unknown` (the
client failed in a way that leaves the outcome open; the transaction must then be all or nothing).
A read_committed consumer (confluent-kafka) reads the topic all along. A value is
`<producer>:<transaction>:<i>`.

`check(...)` is the verdict: every record of a committed transaction read exactly once by a
read_committed consumer, no record of an aborted one ever returned to it, an unknown one all or
nothing. `settled(...)` asks that no transaction hangs: each partition's last stable offset (what a
read_committed ListOffsets answers) has reached its high watermark.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

quiet = logging.getLogger("quiet-txn")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False

PER_TXN = 6


@dataclass
class Ledger:
    """What the producers were told, per (producer, transaction)."""

    outcomes: dict[tuple[str, int], str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, producer: str, k: int, outcome: str) -> None:
        with self.lock:
            self.outcomes[(producer, k)] = outcome

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


def _value(producer: str, k: int, i: int) -> bytes:
    return f"{producer}:{k}:{i}".encode()


def confluent_producer(boot: str, tid: str, topic: str, partitions: int, txns: int, ledger: Ledger,
                       timeout_ms: int = 10000) -> None:
    """librdkafka's transactional producer, by its documented error handling: an abortable error
    aborts, a fatal one (fenced) starts a new producer, a retriable one retries the commit."""
    from confluent_kafka import KafkaException, Producer

    def new() -> Producer:
        p = Producer({"bootstrap.servers": boot, "transactional.id": tid, "transaction.timeout.ms": timeout_ms,
                      "message.timeout.ms": timeout_ms, "logger": quiet})
        deadline = time.monotonic() + 90
        while True:
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                if time.monotonic() > deadline:
                    raise
                ledger.errors.append(f"{tid} init: {e}")
                if e.args[0].fatal():
                    p = Producer({"bootstrap.servers": boot, "transactional.id": tid,
                                  "transaction.timeout.ms": timeout_ms, "message.timeout.ms": timeout_ms,
                                  "logger": quiet})
                time.sleep(0.5)

    p = new()
    for k in range(txns):
        commit = k % 4 != 3
        outcome = "unknown"
        try:
            p.begin_transaction()
            for i in range(PER_TXN):
                p.produce(topic, _value(tid, k, i), partition=(k + i) % partitions)
                p.poll(0)
            if commit:
                for attempt in range(5):
                    try:
                        p.commit_transaction(30)
                        outcome = "committed"
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable() or attempt == 4:
                            raise
            else:
                p.abort_transaction(30)
                outcome = "aborted"
        except KafkaException as e:
            err = e.args[0]
            ledger.errors.append(f"{tid} txn {k}: {err}")
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(30)
                    outcome = "aborted"
                except KafkaException as e2:
                    ledger.errors.append(f"{tid} txn {k} abort: {e2}")
            if outcome == "unknown" or err.fatal():
                p = new()  # fenced or lost: a new incarnation (the coordinator aborts what was open)
        ledger.record(tid, k, outcome)
    p.flush(10)


def aiokafka_producer(boot: str, tid: str, topic: str, partitions: int, txns: int, ledger: Ledger,
                      timeout_ms: int = 10000) -> None:
    """aiokafka's transactional producer: `async with transaction()` commits, an exception aborts;
    a failed commit or abort leaves the outcome open, and a new producer takes over the id."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    class Abort(Exception):
        pass

    async def main() -> None:
        async def new() -> AIOKafkaProducer:
            while True:
                p = AIOKafkaProducer(bootstrap_servers=boot, transactional_id=tid,
                                     transaction_timeout_ms=timeout_ms, request_timeout_ms=30000)
                try:
                    await p.start()
                    return p
                except KafkaError as e:
                    ledger.errors.append(f"{tid} start: {e!r}")
                    await p.stop()
                    await asyncio.sleep(0.5)

        p = await new()
        for k in range(txns):
            commit = k % 4 != 3
            outcome = "unknown"
            try:
                async with p.transaction():
                    for i in range(PER_TXN):
                        await p.send(topic, _value(tid, k, i), partition=(k + i) % partitions)
                    if not commit:
                        raise Abort
                outcome = "committed"
            except Abort:
                outcome = "aborted"
            except (TimeoutError, KafkaError) as e:
                ledger.errors.append(f"{tid} txn {k}: {e!r}")
                await p.stop()
                p = await new()
            ledger.record(tid, k, outcome)
        await p.stop()

    asyncio.run(main())


class ReadCommitted:
    """A read_committed consumer (confluent-kafka, assign mode) polling every partition from the start
    in a thread until stopped: every value it was handed, in order."""

    def __init__(self, boot: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.values: list[str] = []
        self._stop = threading.Event()
        self.c = Consumer({"bootstrap.servers": boot, "group.id": "txn-reader", "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False, "logger": quiet})
        self.c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self.c.poll(0.2)
            if m is not None and m.error() is None:
                self.values.append(m.value().decode())

    def stop(self) -> None:
        self._stop.set()
        self.t.join(10)
        self.c.close()


def ends(boot: str, topic: str, partitions: int, committed: bool) -> dict[int, int]:
    """Each partition's end as ListOffsets answers at an isolation level: the LSO (read_committed) or
    the high watermark; {} while some leader does not answer."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": boot, "group.id": "txn-ends", "logger": quiet,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)[1]
                for p in range(partitions)}
    except KafkaException:
        return {}
    finally:
        c.close()


def settled(boot: str, topic: str, partitions: int) -> bool:
    lso = ends(boot, topic, partitions, committed=True)
    return bool(lso) and lso == ends(boot, topic, partitions, committed=False)


def read_all(boot: str, topic: str, partitions: int, timeout: float = 60) -> list[str]:
    """Everything a fresh read_committed consumer reads from the start up to each partition's LSO."""
    from confluent_kafka import Consumer, TopicPartition

    lso = ends(boot, topic, partitions, committed=True)
    c = Consumer({"bootstrap.servers": boot, "group.id": "txn-final", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "logger": quiet})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m.value().decode())
                continue
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in range(partitions)])}
            if all(pos.get(p, -1) >= end for p, end in lso.items()):
                return out
        raise AssertionError(f"read_committed did not reach the LSO {lso}")
    finally:
        c.close()


def read_all_aiokafka(boot: str, topic: str, partitions: int, timeout: float = 60) -> list[str]:
    """The same with aiokafka's read_committed consumer."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    lso = ends(boot, topic, partitions, committed=True)

    async def main() -> list[str]:
        c = AIOKafkaConsumer(bootstrap_servers=boot, isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        out: list[str] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    out.extend(r.value.decode() for r in recs)
                if all([await c.position(tp) >= lso[tp.partition] for tp in tps]):
                    return out
            raise AssertionError(f"aiokafka read_committed did not reach the LSO {lso}")
        finally:
            await c.stop()

    return asyncio.run(main())


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def check(ledger: Ledger, read: list[str]) -> list[str]:
    """What is wrong with what read_committed consumers were handed, given what producers were told."""
    problems = []
    seen = Counter(read)
    twice = [v for v, n in seen.items() if n > 1]
    if twice:
        problems.append(f"{len(twice)} values read more than once, e.g. {twice[:3]}")
    got: dict[tuple[str, int], set[int]] = {}
    for v in seen:
        producer, k, i = v.rsplit(":", 2)
        got.setdefault((producer, int(k)), set()).add(int(i))
    for key, outcome in sorted(ledger.outcomes.items()):
        have = got.get(key, set())
        if outcome == "committed" and have != set(range(PER_TXN)):
            problems.append(f"committed {key} read {sorted(have)}")
        elif outcome == "aborted" and have:
            problems.append(f"aborted {key} read {sorted(have)}")
        elif outcome == "unknown" and have and have != set(range(PER_TXN)):
            problems.append(f"unknown {key} read in part: {sorted(have)}")
    for key in got:
        if key not in ledger.outcomes:
            problems.append(f"{key} read but never attempted")
    return problems
