"""Issue 48: what a restarted broker answers clients before the controller's first UpdateMetadata.

The window is held open on purpose: broker 1 is SIGKILLed, its partition's leadership moves, and it is
started again on the same port and data with ZooKeeper unreachable, so it listens but never registers
and never hears from the controller (in a real restart the window lasts from opening the port until
the first UpdateMetadata). Such a broker has nothing true to say about the cluster. A Metadata request
waits for its view (`FIRST_VIEW_WAIT_MS`) and, when none comes, the broker closes the connection so the
client asks another broker; FindCoordinator answers COORDINATOR_NOT_AVAILABLE, and a partition it holds
on disk NOT_LEADER_OR_FOLLOWER; no topic is auto-created from that view. Before, it answered Metadata
with itself as the only broker and every topic unknown (a client forgot every other broker and
leader), then with no brokers at all, which librdkafka took: it asked nobody again for the 30 s of its
message timeout.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from brokerlib import free_port
from conftest import make_cluster
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from logbroker.core.metadata import FIRST_VIEW_WAIT_MS
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from rawclient import RawClient
from test_repl_failover import quiet, wait_for
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper


def _metadata(r: RawClient, topics: list[str] | None) -> Any:
    return r.request(make_message(MetadataRequest, 9, {
        "topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}),
        MetadataResponse)


@pytest.mark.parametrize("auto_create", [False, True], ids=["no-auto-create", "auto-create"])
def test_a_restarted_broker_without_its_first_view_sends_its_clients_elsewhere(
        tmp_path: Path, zookeeper: LocalZooKeeper, auto_create: bool) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = make_cluster(tmp_path, zookeeper, extra=(f"auto.create.topics.enable={str(auto_create).lower()}",))
    try:
        boot = ",".join(b.bootstrap for b in cluster)
        a = AdminClient({"bootstrap.servers": boot, "logger": quiet})
        wait_for(lambda: len(a.list_topics(timeout=10).brokers) == 3, 30, "three brokers in the metadata")
        for f in a.create_topics([NewTopic("t", 2, -1, replica_assignment=[[1, 2, 3], [2, 3, 1]])]).values():
            f.result(20)
        p = Producer({"bootstrap.servers": boot, "acks": "all", "logger": quiet})
        for i in range(10):
            p.produce("t", b"x", partition=i % 2)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": boot, "group.id": "g", "logger": quiet})
        c.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
        c.close()

        cluster[0].kill()

        def moved() -> int:
            md = a.list_topics("t", timeout=10).topics["t"].partitions[0]
            return md.leader if md.leader not in (-1, 1) else 0
        wait_for(moved, 30, "t-0's leadership to leave the killed broker 1")
        held = cluster[0]
        held.overrides = [o for o in held.overrides if not o.startswith("zookeeper.connect=")] + [
            f"zookeeper.connect=127.0.0.1:{free_port()}"]  # nothing listens there: it never registers
        held.start()

        for topics in (["t", "fresh-topic"], None):
            r = RawClient(held.bootstrap, timeout=FIRST_VIEW_WAIT_MS / 1000 + 10)
            t0 = time.monotonic()
            with pytest.raises(ConnectionError):
                m = _metadata(r, topics)
                pytest.fail(f"a broker without a view answered Metadata: {m}")
            waited = time.monotonic() - t0
            assert FIRST_VIEW_WAIT_MS / 1000 - 0.5 <= waited < FIRST_VIEW_WAIT_MS / 1000 + 5, (
                f"the connection closed after {waited:.1f} s, not after waiting for the view")
            r.close()

        # librdkafka, which took an answer without brokers for its whole view, reaches the leaders
        # through the other brokers of its bootstrap list
        failed: list[str] = []
        for attempt in range(3):
            p = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster), "acks": "all",
                          "message.timeout.ms": 20000, "logger": quiet})
            for i in range(5):
                p.produce("t", b"y", partition=i % 2,
                          on_delivery=lambda e, m: failed.append(str(e)) if e else None)
            assert p.flush(30) == 0 and failed == [], f"producer {attempt} with the held broker in its list: {failed}"

        r = RawClient(held.bootstrap)
        for key_type in (0, 1):  # the group and the transaction coordinator
            fc = r.request(make_message(FindCoordinatorRequest, 3, {"key": "g", "key_type": key_type}),
                           FindCoordinatorResponse)
            assert (fc.error_code, fc.node_id) == (int(Err.COORDINATOR_NOT_AVAILABLE), -1), fc
        of = r.request(make_message(OffsetFetchRequest, 7, {
            "group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": True}),
            OffsetFetchResponse)
        assert of.error_code == int(Err.NOT_COORDINATOR), of
        lo = r.request(make_message(ListOffsetsRequest, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
            ListOffsetsResponse)
        assert lo.topics[0].partitions[0].error_code == int(Err.NOT_LEADER_OR_FOLLOWER), lo
        r.close()
        # no topic was created from that view: the live brokers still know only `t` (and the offsets topic)
        assert "fresh-topic" not in AdminClient({"bootstrap.servers": cluster[1].bootstrap}).list_topics(
            timeout=10).topics
    finally:
        for b in cluster:
            b.kill()
