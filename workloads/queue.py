"""The queue workload (Jepsen's `jepsen.tests.kafka` queue), through confluent-kafka (librdkafka).

Producers send unique integers to key k (= partition k of the topic) and wait for the delivery
report; consumers `assign` keys and poll. Outcomes, following STYLE.md 10 (a timeout is never a
failure): a delivery report without error is `ok` with its offset; errors that prove nothing was
sent — unknown topic/partition, message too large, invalid argument, raised before any request
left — are `fail`; every other error (message timed out, not enough replicas after retries,
broker transport failures, an unknown producer id...) is `info`: the write may have happened.

Each worker's ops come from its own RNG derived from the run seed, so the sequence of invocations
per worker is a pure function of the seed (timing aside).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

#: errors after which the message certainly was not written
DEFINITE_FAILURES = {
    KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError._MSG_TIMED_OUT_QUEUE if hasattr(KafkaError, "_MSG_TIMED_OUT_QUEUE") else -10_000,
    KafkaError._INVALID_ARG, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUIRED_ACKS,
}
SEND_TIMEOUT_MS = 5000
POLL_BATCH = 50

_quiet = logging.getLogger("chaos.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


@dataclass(frozen=True, slots=True)
class Invocation:
    f: str  # send | poll | assign
    value: Any  # [["send", k, v]] | [["poll"]] | [keys]


def generate(seed: int, worker: int, partitions: int) -> Iterator[Invocation]:
    """Worker `worker`'s op stream: always assign first, then mostly sends and polls."""
    rng = random.Random(f"{seed}/queue/worker-{worker}")
    seq = 0
    yield Invocation("assign", sorted(rng.sample(range(partitions), k=rng.randint(1, partitions))))
    while True:
        x = rng.random()
        if x < 0.6:
            seq += 1
            yield Invocation("send", [["send", rng.randrange(partitions), (worker + 1) * 1_000_000_000 + seq]])
        elif x < 0.95:
            yield Invocation("poll", [["poll"]])
        else:
            yield Invocation("assign", sorted(rng.sample(range(partitions), k=rng.randint(1, partitions))))


class QueueClient:
    """One process's connection: a producer and a consumer, reopened when the process is retired."""

    def __init__(self, bootstrap: str, topic: str, *, acks: str, idempotence: bool, process: int) -> None:
        self.topic = topic
        common = {"bootstrap.servers": bootstrap, "logger": _quiet, "socket.timeout.ms": 3000,
                  "metadata.max.age.ms": 2000, "topic.metadata.refresh.interval.ms": 1000}
        self.producer = Producer({**common, "acks": "all" if acks in ("all", "-1") else acks,
                                  "enable.idempotence": idempotence, "message.timeout.ms": SEND_TIMEOUT_MS,
                                  "request.timeout.ms": 3000, "linger.ms": 0})
        self.consumer = Consumer({**common, "group.id": f"chaos-{process}", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                  "fetch.wait.max.ms": 100})

    def send(self, key: int, value: int) -> tuple[str, Any, str | None]:
        result: list[tuple[Any, Any]] = []
        try:
            self.producer.produce(self.topic, str(value).encode(), partition=key,
                                  on_delivery=lambda e, m: result.append((e, m)))
        except (BufferError, KafkaException) as e:  # refused before sending anything
            return "fail", None, str(e)
        self.producer.flush(SEND_TIMEOUT_MS / 1000 + 2)
        if not result:
            return "info", None, "no delivery report in time"
        err, msg = result[0]
        if err is None:
            return "ok", msg.offset(), None
        if err.code() in DEFINITE_FAILURES:
            return "fail", None, err.str()
        return "info", None, err.str()

    def assign(self, keys: list[int]) -> None:
        self.consumer.assign([TopicPartition(self.topic, k, OFFSET_BEGINNING) for k in keys])

    def poll(self, timeout: float = 0.5) -> dict[str, list[list[int]]]:
        out: dict[str, list[list[int]]] = {}
        for m in self.consumer.consume(POLL_BATCH, timeout):
            if m.error() is not None:
                if m.error().fatal():
                    raise KafkaException(m.error())
                continue
            out.setdefault(str(m.partition()), []).append([m.offset(), int(m.value())])
        return out

    def positions(self) -> dict[int, int]:
        return {tp.partition: tp.offset for tp in self.consumer.position(self.consumer.assignment())}

    def high_watermarks(self, keys: list[int]) -> dict[int, int]:
        return {k: self.consumer.get_watermark_offsets(TopicPartition(self.topic, k), timeout=5)[1] for k in keys}

    def close(self) -> None:
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError):
            pass
        self.producer.flush(0)
