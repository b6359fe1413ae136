"""A broker asked for Metadata before the controller's first UpdateMetadata waits for that view.

Issue 48 and a CI failure of `test_repl_failover`: a producer created just after a broker restarted
asked that broker first; its answer named no brokers, librdkafka took it for its whole view, and every
message timed out. The request now waits (in the purgatory, `FIRST_VIEW`) and is answered from the
view once it arrives; when the view does not come within `FIRST_VIEW_WAIT_MS`, the answer is the empty
one, which the socket server turns into a closed connection (`test_repl_restart_window` shows that on
real processes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka.protocol.metadata import MetadataRequest
from logbroker.core.broker import BrokerCore
from logbroker.core.metadata import FIRST_VIEW_WAIT_MS
from logbroker.offload import inline
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from logbroker.replication.manager import ReplicaManager
from memstore import MemoryStore
from test_min_isr_hw import one_broker

METADATA = 3


def _ask(core: BrokerCore, topics: list[str] | None) -> Any:
    req = make_message(MetadataRequest, 9, {
        "topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
    return core.handle(METADATA, 9, req)


def _answers(reply: Any) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    reply.deferred.on_done(lambda version, body: got.append(body))
    return got


def _view(rm: ReplicaManager) -> None:
    """The controller's first UpdateMetadata: brokers 1 and 2, t-0 led by 2."""
    rm.update_metadata({"type": "update_metadata", "controller_id": 2, "controller_epoch": 1, "seq": 1,
                        "brokers": [{"id": 1, "host": "h1", "port": 9092}, {"id": 2, "host": "h2", "port": 9092}],
                        "partitions": [{"topic": "t", "partition": 0, "leader": 2, "leader_epoch": 3,
                                        "replicas": [1, 2], "isr": [1, 2]}]})


def test_metadata_before_the_first_view_is_answered_from_it_when_it_arrives(tmp_path: Path) -> None:
    core = one_broker(tmp_path)
    rm = ReplicaManager(core, MemoryStore(), inline)
    core.replication = rm
    reply = _ask(core, ["t"])
    assert reply.deferred is not None and not reply.deferred.done, "answered before the broker had a view"
    got = _answers(reply)
    core.clock.advance(FIRST_VIEW_WAIT_MS // 2)  # type: ignore[attr-defined]
    core.tick()
    assert got == [], "the wait ended before its deadline"
    _view(rm)
    assert len(got) == 1, "the view arrived and the request still waits"
    body = got[0]
    assert [b["node_id"] for b in body["brokers"]] == [1, 2] and body["controller_id"] == 2
    [topic] = body["topics"]
    assert (topic["name"], topic["error_code"]) == ("t", 0)
    assert [(p["partition_index"], p["leader_id"], p["leader_epoch"]) for p in topic["partitions"]] == [(0, 2, 3)]
    # and with the view in hand, Metadata is answered at once
    assert _ask(core, None).deferred is None


def test_metadata_without_a_view_by_the_deadline_names_no_broker(tmp_path: Path) -> None:
    """The empty answer: the socket server closes the connection instead of sending it."""
    core = one_broker(tmp_path)
    core.replication = ReplicaManager(core, MemoryStore(), inline)
    asks = [_ask(core, ["t", "bad name!"]), _ask(core, None)]
    got = [_answers(r) for r in asks]
    core.clock.advance(FIRST_VIEW_WAIT_MS)  # type: ignore[attr-defined]
    core.tick()
    assert [len(g) for g in got] == [1, 1], "the deadline passed and a request still waits"
    named, every = got[0][0], got[1][0]
    assert named["brokers"] == [] and named["controller_id"] == -1
    assert {t["name"]: (t["error_code"], t["partitions"]) for t in named["topics"]} == {
        "t": (int(Err.LEADER_NOT_AVAILABLE), []), "bad name!": (int(Err.INVALID_TOPIC_EXCEPTION), [])}
    assert every["brokers"] == [] and every["topics"] == []
    assert core.metadata.topics == {}, "a topic was created from no view"
