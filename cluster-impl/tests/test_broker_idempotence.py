"""An idempotent producer whose connections are cut mid-stream gets no duplicates and no gaps.

The client retries batches whose responses were lost; the broker recognises them by (producer id,
epoch, sequence) and answers with the original offsets instead of appending them again.
"""

from __future__ import annotations

import logging
import threading
import time

from brokerlib import BrokerProc
from kafka.protocol.producer import ProduceResponse
from logbroker.protocol.errors import Err
from rawclient import RawClient, batch, produce_req
from tcpproxy import CuttableProxy
from test_broker_clients import _create, _read_confluent

quiet = logging.getLogger("quiet-librdkafka-idem")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def test_idempotent_confluent_producer_survives_dropped_connections(broker_factory) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    b0: BrokerProc = broker_factory()
    proxy = CuttableProxy(b0.port)
    b0.overrides = [f"advertised.port={proxy.port}"]
    b0.start()
    bootstrap = f"127.0.0.1:{proxy.port}"
    n = 5000
    try:
        _create(bootstrap, "idem", 1)
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                      "batch.num.messages": 50, "message.timeout.ms": 60000, "logger": quiet})
        acked: list[int] = []
        errors: list[object] = []
        stop = threading.Event()

        def cutter() -> None:
            for _ in range(6):
                if stop.wait(0.4):
                    return
                proxy.cut_all()

        t = threading.Thread(target=cutter, daemon=True)
        t.start()
        for i in range(n):
            p.produce("idem", value=str(i).encode(), partition=0,
                      on_delivery=lambda e, m: errors.append(e) if e else acked.append(int(m.value())))
            if i % 10 == 0:
                p.poll(0.01)  # spread the stream over a few seconds, across the cuts
        remaining = p.flush(90)
        stop.set()
        t.join()
        assert remaining == 0 and errors == []
        assert proxy.cuts > 3, "the test must actually have dropped connections"
        got = _read_confluent(bootstrap, "idem", 0, n + 1, timeout=10)
        assert got == list(range(n)), "no duplicates, no gaps, in order"
    finally:
        proxy.close()


def test_duplicate_batch_gets_original_offset_and_gap_is_out_of_order(broker: BrokerProc) -> None:
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
    from logbroker.protocol.apis import make_message

    _create(broker.bootstrap, "seq", 1)
    c = RawClient(broker.bootstrap)
    try:
        r = c.request(make_message(InitProducerIdRequest, 1, {"transactional_id": None,
                                                             "transaction_timeout_ms": 60000}), InitProducerIdResponse)
        pid, epoch = r.producer_id, r.producer_epoch
        first = batch([b"a", b"b"], producer_id=pid, epoch=epoch, seq=0)
        r1 = c.request(produce_req("seq", 0, first), ProduceResponse).responses[0].partition_responses[0]
        r2 = c.request(produce_req("seq", 0, first), ProduceResponse).responses[0].partition_responses[0]
        assert (r1.error_code, r1.base_offset) == (0, 0)
        assert (r2.error_code, r2.base_offset) == (0, 0), "a retried batch is not appended twice"
        gap = batch([b"d"], producer_id=pid, epoch=epoch, seq=5)
        r3 = c.request(produce_req("seq", 0, gap), ProduceResponse).responses[0].partition_responses[0]
        assert r3.error_code == Err.OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = batch([b"c"], producer_id=pid, epoch=epoch, seq=2)
        r4 = c.request(produce_req("seq", 0, nxt), ProduceResponse).responses[0].partition_responses[0]
        assert (r4.error_code, r4.base_offset) == (0, 2)
    finally:
        c.close()
    time.sleep(0)
