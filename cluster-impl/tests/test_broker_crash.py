"""SIGKILL during a produce stream: acknowledged data survives with fsync-per-append; logs stay CRC-valid.

With the default flush settings a SIGKILL still keeps what reached the page cache (the process dies,
the kernel does not), so this test cannot show the unflushed-loss trade-off; it shows that recovery
leaves a log whose every batch passes its CRC, which is what the default promises.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
from brokerlib import BrokerProc
from logbroker.dump import dump_partition
from test_broker_clients import _create, _read_confluent

quiet = logging.getLogger("quiet-librdkafka-crash")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def _stream_and_kill(b: BrokerProc, topic: str, kill_after: float) -> list[int]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 1, "message.timeout.ms": 3000,
                  "logger": quiet})
    acked: list[int] = []
    lock = threading.Lock()

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            with lock:
                acked.append(int(msg.value()))  # type: ignore[attr-defined]

    killer = threading.Timer(kill_after, b.kill)
    killer.start()
    i = 0
    t_end = time.monotonic() + kill_after + 1.0
    while time.monotonic() < t_end:
        try:
            p.produce(topic, value=str(i).encode(), partition=0, on_delivery=on_delivery)
            i += 1
        except BufferError:
            pass
        p.poll(0.0005 if i % 50 else 0.002)
    p.flush(10)
    killer.join()
    return acked


@pytest.mark.slow
@pytest.mark.parametrize("fsync_each", [True, False], ids=["flush.messages=1", "default-flush"])
def test_sigkill_during_produce(broker_factory, fsync_each: bool) -> None:  # type: ignore[no-untyped-def]
    overrides = ["flush.messages=1"] if fsync_each else []
    b: BrokerProc = broker_factory(overrides=overrides)
    b.start()
    _create(b.bootstrap, "crash", 1)
    acked = _stream_and_kill(b, "crash", kill_after=1.5)
    assert len(acked) > 100, "the stream must have been running when the broker died"
    assert not b.alive()
    b.start()  # same port, same data: recovery runs
    dump = dump_partition(Path(b.data) / "crash-0")
    summary, records = dump[0], dump[1:]
    assert "torn_bytes" not in summary, "recovery must leave a CRC-valid log"
    offsets = [r["offset"] for r in records]
    assert offsets == list(range(len(offsets)))
    got = _read_confluent(b.bootstrap, "crash", 0, len(records), timeout=20)
    assert got == [int(r["value"]) for r in records]
    if fsync_each:
        missing = set(acked) - set(got)
        assert not missing, f"{len(missing)} acknowledged messages lost: {sorted(missing)[:5]}"
        order = [v for v in got if v in set(acked)]
        assert order == sorted(acked, key=order.index), "acknowledged messages keep their order"
    b.stop()
    json.dumps(summary)  # the summary line is plain JSON for the checker
