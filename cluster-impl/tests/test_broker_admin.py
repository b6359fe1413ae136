"""Topic admin as clients expect it, on a standalone broker, with confluent-kafka's and kafka-python's
admin clients: CreateTopics validates and applies configs (or refuses them, creating nothing),
takes manual assignments and validate_only; DescribeConfigs, IncrementalAlterConfigs/AlterConfigs
and DeleteTopics; Metadata v0."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from brokerlib import BrokerProc
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from logbroker.protocol.apis import make_message
from rawclient import RawClient

quiet = logging.getLogger("quiet-admin")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def ck_admin(b: BrokerProc) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})


def topics(b: BrokerProc) -> set[str]:
    return set(ck_admin(b).list_topics(timeout=10).topics)


def create(b: BrokerProc, *new: Any, validate_only: bool = False) -> dict[str, Any]:
    """topic -> None or the KafkaError of its creation."""
    from confluent_kafka import KafkaException

    out: dict[str, Any] = {}
    a = ck_admin(b)
    for name, f in a.create_topics(list(new), validate_only=validate_only).items():
        try:
            f.result(15)
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def describe(b: BrokerProc, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    a = ck_admin(b)
    res = a.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    return {k: e for k, e in next(iter(res.values())).result(15).items()}


def produce_one(b: BrokerProc, topic: str, value: bytes, acks: str = "all") -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": acks, "message.timeout.ms": 5000, "retries": 0,
                  "logger": quiet})
    got: list[Any] = []
    p.produce(topic, value, partition=0, on_delivery=lambda e, m: got.append(e))
    p.flush(15)
    return got[0]


@pytest.mark.parametrize(("config", "why"), [
    ({"no.such.config": "1"}, "unknown"),
    ({"compression.type": "gzip"}, "compress"),
    ({"retention.ms": "1000"}, "deleted"),
    ({"cleanup.policy": "compact"}, "compaction"),
    ({"min.insync.replicas": "zero"}, "integer"),
], ids=["unknown-key", "compression", "retention", "compact", "bad-int"])
def test_refused_configs_create_nothing(broker: BrokerProc, config: dict[str, str], why: str) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    err = create(broker, NewTopic("refused", 1, 1, config=config))["refused"]
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG and why in err.str(), err
    assert "refused" not in topics(broker)


def test_honoured_configs_take_effect_and_can_be_changed(broker: BrokerProc) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

    cfg = {"min.insync.replicas": "2", "max.message.bytes": "2000", "retention.ms": "-1", "cleanup.policy": "delete"}
    assert create(broker, NewTopic("honoured", 1, 1, config=cfg)) == {"honoured": None}
    described = describe(broker, "honoured")
    assert {k: described[k].value for k in cfg} == cfg
    assert described["min.insync.replicas"].source == 1 and described["segment.bytes"].source == 5  # dynamic, default
    assert produce_one(broker, "honoured", b"x").code() == KafkaError.NOT_ENOUGH_REPLICAS, "min.insync.replicas=2"
    assert produce_one(broker, "honoured", b"x" * 3000, acks="1").code() == KafkaError.MSG_SIZE_TOO_LARGE

    a = ck_admin(broker)
    res = ConfigResource(ResourceType.TOPIC, "honoured", incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    for f in a.incremental_alter_configs([res]).values():
        f.result(15)
    assert produce_one(broker, "honoured", b"x" * 3000) is None, "both changes took effect"
    assert describe(broker, "honoured")["max.message.bytes"].source == 5, "deleted: back to the default"

    bad = ConfigResource(ResourceType.TOPIC, "honoured", incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="INVALID_CONFIG|retention"):
        for f in a.incremental_alter_configs([bad]).values():
            f.result(15)
    assert describe(broker, "honoured")["retention.ms"].value == "-1", "a refused change changes nothing"

    broker.stop()
    broker.start()
    assert describe(broker, "honoured")["min.insync.replicas"].value == "1", "overrides survive a restart"


def test_validate_only_and_manual_assignment(broker: BrokerProc) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    assert create(broker, NewTopic("dry", 3, 1), validate_only=True) == {"dry": None}
    assert "dry" not in topics(broker)
    assert create(broker, NewTopic("placed", 2, -1, replica_assignment=[[1], [1]])) == {"placed": None}
    assert len(ck_admin(broker).list_topics("placed", timeout=10).topics["placed"].partitions) == 2
    err = create(broker, NewTopic("misplaced", 2, -1, replica_assignment=[[1], [7]]))["misplaced"]
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT and "misplaced" not in topics(broker)


def test_delete_topic_and_create_it_again_empty(broker: BrokerProc) -> None:
    from confluent_kafka.admin import NewTopic

    assert create(broker, NewTopic("gone", 2, 1, config={"min.insync.replicas": "1"})) == {"gone": None}
    assert produce_one(broker, "gone", b"old") is None
    a = ck_admin(broker)
    for f in a.delete_topics(["gone"]).values():
        f.result(15)
    assert "gone" not in topics(broker)
    assert not (broker.data / "gone-0").exists() and not (broker.data / "gone-1").exists()
    assert create(broker, NewTopic("gone", 1, 1)) == {"gone": None}
    assert "min.insync.replicas" not in {k for k, e in describe(broker, "gone").items() if e.source == 1}
    c = RawClient(broker.bootstrap)
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    req = make_message(ListOffsetsRequest, 1, {"replica_id": -1, "topics": [
        {"name": "gone", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert c.request(req, ListOffsetsResponse).topics[0].partitions[0].offset == 0, "the new topic is empty"
    c.close()


def test_kafka_python_admin_client(broker: BrokerProc) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidConfigurationError

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        a.create_topics([NewTopic("kp-admin", 1, 1, topic_configs={"flush.messages": "1"})])
        with pytest.raises(InvalidConfigurationError):
            a.create_topics([NewTopic("kp-bad", 1, 1, topic_configs={"bogus": "1"})])
        assert "kp-bad" not in a.list_topics()
        res = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        entry = res["topic"]["kp-admin"]["flush.messages"]
        assert entry["value"] == "1" and entry["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"flush.messages": "5"})])
        assert describe(broker, "kp-admin")["flush.messages"].value == "5"
        a.delete_topics(["kp-admin"])
        assert "kp-admin" not in a.list_topics()
    finally:
        a.close()


def test_metadata_v0_lists_every_topic_for_an_empty_list(broker: BrokerProc) -> None:
    from confluent_kafka.admin import NewTopic

    assert create(broker, NewTopic("m0a", 1, 1), NewTopic("m0b", 1, 1)) == {"m0a": None, "m0b": None}
    c = RawClient(broker.bootstrap)
    resp = c.request(make_message(MetadataRequest, 0, {"topics": []}), MetadataResponse)
    c.close()
    assert {"m0a", "m0b"} <= {t.name for t in resp.topics} and resp.brokers[0].node_id == 1
