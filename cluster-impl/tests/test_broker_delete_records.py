"""DeleteRecords on a real broker (confluent-kafka's admin client): the log start moves, consumers start
there, it survives a restart, and what may not be deleted is refused."""

from __future__ import annotations

import logging

from brokerlib import BrokerProc
from rawclient import RawClient, batch, produce_req
from test_broker_clients import _create

quiet = logging.getLogger("quiet-librdkafka-delrec")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
TOPIC = "dr"


def delete(bootstrap: str, topic: str, offset: int) -> tuple[int, str | None]:
    """(low watermark, None) or (-1, the error's name)."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    (f,) = admin.delete_records([TopicPartition(topic, 0, offset)]).values()
    try:
        return f.result(15).low_watermark, None
    except KafkaException as e:
        return -1, e.args[0].name()


def earliest(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr", "logger": quiet})
    try:
        return int(c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[0])
    finally:
        c.close()


def read_from_beginning(bootstrap: str, want: int) -> list[int]:
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr", "enable.auto.commit": False, "logger": quiet})
    c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    got: list[int] = []
    deadline = time.monotonic() + 15
    try:
        while len(got) < want and time.monotonic() < deadline:
            got.extend(int(m.value()) for m in c.consume(100, 0.5) if m.error() is None)
    finally:
        c.close()
    return got


def test_delete_records_moves_the_log_start_for_consumers_and_across_a_restart(broker: BrokerProc) -> None:
    from kafka.protocol.producer import ProduceResponse

    _create(broker.bootstrap, TOPIC, 1)
    c = RawClient(broker.bootstrap)
    for i in range(5):
        r = c.request(produce_req(TOPIC, 0, batch([str(i).encode()]), acks=-1), ProduceResponse)
        assert r.responses[0].partition_responses[0].error_code == 0
    c.close()
    assert delete(broker.bootstrap, TOPIC, 3) == (3, None)
    assert earliest(broker.bootstrap) == 3
    assert read_from_beginning(broker.bootstrap, 2) == [3, 4]
    assert delete(broker.bootstrap, TOPIC, 6) == (-1, "OFFSET_OUT_OF_RANGE"), "beyond the high watermark"
    assert delete(broker.bootstrap, TOPIC, 1) == (3, None), "the log start never moves back"
    assert delete(broker.bootstrap, "__consumer_offsets", 0)[1] == "TOPIC_EXCEPTION", "an internal topic"
    assert broker.stop() == 0
    broker.start()
    assert earliest(broker.bootstrap) == 3
    assert read_from_beginning(broker.bootstrap, 2) == [3, 4]
