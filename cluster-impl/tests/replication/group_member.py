"""One consumer-group member as its own process, for the coordinator failover scenario.

    python group_member.py KIND BOOTSTRAP GROUP TOPIC OUT [EVERY [idle]]

KIND is `confluent`, `kafka-python` or `aiokafka`: a real client of that library, configured as a new
user would (group id, `auto.offset.reset=earliest`, auto commit off, everything else at the client's
defaults), subscribed to TOPIC. It commits its positions synchronously after every EVERY records it
reads (20) — and with `idle`, also after an empty poll if it read anything since its last commit —
and writes one JSON line per event to OUT (flushed at once, so a kill loses nothing):
`{"ev": "rec", "p", "o", "v"}` a record read; `{"ev": "commit", "ok", "err", "offsets"}` a commit's
outcome, with the positions it stored (partition → offset); `{"ev": "assign", "parts"}` an
assignment; `{"ev": "error", "p", "err"}` an error librdkafka gave as a message (a detected log
truncation, an offset reset). It runs until SIGTERM (then closes, leaving the group).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any, TextIO

stop = False


def _on_term(*_: object) -> None:
    global stop
    stop = True


class Out:
    def __init__(self, f: TextIO) -> None:
        self.f = f

    def __call__(self, **ev: Any) -> None:
        ev["t"] = round(time.time(), 3)
        self.f.write(json.dumps(ev) + "\n")
        self.f.flush()


class Committer:
    """When to commit: after every `every` records read, and (`idle`) after a poll that brought nothing
    while records read since the last commit are not committed yet."""

    def __init__(self, every: int, idle: bool) -> None:
        self.every, self.idle, self.since = every, idle, 0
        #: partition → the offset after the last record read since the last assignment: what a commit
        #: of the consumed positions stores, logged with each commit's outcome
        self.positions: dict[int, int] = {}

    def assigned(self) -> None:
        self.positions = {}

    def read(self, partition: int, offset: int) -> bool:
        self.positions[partition] = offset + 1
        self.since += 1
        return self.since >= self.every

    def quiet(self) -> bool:
        return self.idle and self.since > 0

    def done(self) -> None:
        self.since = 0


def run_confluent(boot: str, group: str, topic: str, out: Out, when: Committer) -> None:
    from confluent_kafka import Consumer, KafkaException

    quiet = logging.getLogger("member")
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "logger": quiet})
    def on_assign(_c: Any, ps: Any) -> None:
        when.assigned()
        out(ev="assign", parts=sorted(p.partition for p in ps))

    c.subscribe([topic], on_assign=on_assign,
                on_revoke=lambda _c, ps: out(ev="revoke", parts=sorted(p.partition for p in ps)))

    def commit() -> None:
        when.done()
        try:
            done = c.commit(asynchronous=False)
            out(ev="commit", ok=True, err=None, offsets={str(p.partition): p.offset for p in done or []
                                                         if p.offset >= 0})
        except KafkaException as e:
            out(ev="commit", ok=False, err=str(e))

    while not stop:
        m = c.poll(0.2)
        if m is not None and m.error() is not None:  # kept for the post-mortem (a truncation, a reset)
            out(ev="error", p=m.partition(), err=str(m.error()))
        if m is None or m.error() is not None:
            if when.quiet():
                commit()
            continue
        out(ev="rec", p=m.partition(), o=m.offset(), v=int(m.value()))
        if when.read(m.partition(), m.offset()):
            commit()
    c.close()


def run_kafka_python(boot: str, group: str, topic: str, out: Out, when: Committer) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaError

    c = KafkaConsumer(bootstrap_servers=boot.split(","), group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned: Any) -> None:
            when.assigned()
            out(ev="assign", parts=sorted(p.partition for p in assigned))

        def on_partitions_revoked(self, revoked: Any) -> None:
            out(ev="revoke", parts=sorted(p.partition for p in revoked))

    def commit() -> None:
        when.done()
        offsets = {str(k): v for k, v in when.positions.items()}
        try:
            c.commit()
            out(ev="commit", ok=True, err=None, offsets=offsets)
        except KafkaError as e:
            out(ev="commit", ok=False, err=repr(e))

    c.subscribe([topic], listener=Listener())
    while not stop:
        got = c.poll(200)
        if not got and when.quiet():
            commit()
        for _tp, recs in got.items():
            for r in recs:
                out(ev="rec", p=r.partition, o=r.offset, v=int(r.value))
                if when.read(r.partition, r.offset):
                    commit()
    c.close()


def run_aiokafka(boot: str, group: str, topic: str, out: Out, when: Committer) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_assigned(self, assigned: Any) -> None:
            when.assigned()
            out(ev="assign", parts=sorted(p.partition for p in assigned))

        async def on_partitions_revoked(self, revoked: Any) -> None:
            out(ev="revoke", parts=sorted(p.partition for p in revoked))

    async def main() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=boot, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)

        async def commit() -> None:
            when.done()
            offsets = {str(k): v for k, v in when.positions.items()}
            try:
                await c.commit()
                out(ev="commit", ok=True, err=None, offsets=offsets)
            except KafkaError as e:
                out(ev="commit", ok=False, err=repr(e))

        c.subscribe([topic], listener=Listener())
        await c.start()
        try:
            while not stop:
                got = await c.getmany(timeout_ms=200)
                if not got and when.quiet():
                    await commit()
                for _tp, recs in got.items():
                    for r in recs:
                        out(ev="rec", p=r.partition, o=r.offset, v=int(r.value))
                        if when.read(r.partition, r.offset):
                            await commit()
        finally:
            await c.stop()

    asyncio.run(main())


KINDS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def main(argv: list[str]) -> int:
    kind, boot, group, topic, path = argv[:5]
    every = int(argv[5]) if len(argv) > 5 else 20
    idle = len(argv) > 6 and argv[6] == "idle"
    signal.signal(signal.SIGTERM, _on_term)
    logging.basicConfig(level=os.environ.get("GROUP_MEMBER_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with open(path, "a") as f:
        out = Out(f)
        out(ev="start", kind=kind)
        KINDS[kind](boot, group, topic, out, Committer(every, idle))
        out(ev="stop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
