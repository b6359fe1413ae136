"""The partition side of transactions in a real `BrokerCore`, sans-IO (no sockets, a manual clock):
WriteTxnMarkers answered after the ISR has the marker, read_committed fetches and their long polls,
fetch sessions, ListOffsets, and the bug switches that break each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest, WriteTxnMarkersRequest
from kafka.record.default_records import DefaultRecordBatch
from logbroker.config import DEFAULTS, from_mapping
from logbroker.core.broker import BrokerCore
from logbroker.core.clock import ManualClock
from logbroker.core.partition import TopicPartition
from logbroker.core.reply import Reply
from logbroker.log.batch import iter_batches
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from rawclient import batch
from test_txn_partition import txn_batch

TOPIC = "t"
TXN_ID = "tx"


def make_core(tmp_path: Path, *bugs: str, **settings: str) -> BrokerCore:
    from logbroker.bugs import parse_bugs

    cfg = from_mapping({**DEFAULTS, "log.dirs": str(tmp_path), "broker.id": "1", **settings}, parse_bugs(bugs))
    c = BrokerCore(cfg, ManualClock(1000))
    c.replication.start()  # type: ignore[attr-defined]
    c.create_local_topic(TOPIC, 2)
    return c


@pytest.fixture
def core(tmp_path: Path) -> BrokerCore:
    # no transaction coordinator in this core: verification is the subject of its own tests
    return make_core(tmp_path, **{"transaction.kip890.enable": "false"})


def body(r: Reply) -> Any:
    """The response of a request that is answered (a finished waiter's body is built again)."""
    if r.deferred is not None:
        assert r.deferred.done, "still waiting"
        return r.deferred.complete(False)
    assert r.body is not None
    return r.body


def producer_id(core: BrokerCore) -> int:
    r = body(core.handle(22, 1, make_message(InitProducerIdRequest, 1, {
        "transactional_id": None, "transaction_timeout_ms": 60000})))
    return int(r["producer_id"])


def produce(core: BrokerCore, records: bytes, *, partition: int = 0, txn_id: str | None = TXN_ID,
            acks: int = -1) -> dict[str, Any]:
    r = core.handle(0, 9, make_message(ProduceRequest, 9, {
        "transactional_id": txn_id, "acks": acks, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}]}))
    return dict(body(r)["responses"][0]["partition_responses"][0])


def markers(core: BrokerCore, pid: int, epoch: int, commit: bool, partitions: list[int], coordinator_epoch: int = 0,
            version: int = 1) -> Reply:
    return core.handle(27, version, make_message(WriteTxnMarkersRequest, version, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch, "topics": [{"name": TOPIC, "partition_indexes": partitions}]}]}))


def marker_errors(r: Reply) -> list[int]:
    return [p["error_code"] for m in body(r)["markers"] for t in m["topics"] for p in t["partitions"]]


def fetch(core: BrokerCore, offset: int, *, committed: bool, wait_ms: int = 0, session: tuple[int, int] = (0, -1),
          partitions: tuple[int, ...] = (0,)) -> Reply:
    return core.handle(1, 11, make_message(FetchRequest, 11, {
        "replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": int(committed), "session_id": session[0], "session_epoch": session[1],
        "topics": [{"topic": TOPIC, "partitions": [{"partition": i, "current_leader_epoch": -1, "fetch_offset": offset,
                                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                                                    for i in partitions]}],
        "forgotten_topics_data": [], "rack_id": ""}))


def values(records: bytes) -> list[bytes]:
    out = []
    for pos, h in iter_batches(records):
        if not h.is_control:
            out.extend(r.value for r in DefaultRecordBatch(records[pos: pos + h.size]))
    return out


def latest(core: BrokerCore, committed: bool) -> int:
    part = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
    r = body(core.handle(2, 5, make_message(ListOffsetsRequest, 5, {
        "replica_id": -1, "isolation_level": int(committed), "topics": [{"name": TOPIC, "partitions": [part]}]})))
    return int(r["topics"][0]["partitions"][0]["offset"])


def test_read_committed_sees_committed_records_and_learns_the_aborted_ones(core: BrokerCore) -> None:
    a, b = producer_id(core), producer_id(core)
    assert produce(core, batch([b"before"]), txn_id=None)["error_code"] == 0  # 0
    assert produce(core, txn_batch(a, 0, 0))["error_code"] == 0  # 1..2
    assert produce(core, txn_batch(b, 0, 0))["error_code"] == 0  # 3..4
    assert latest(core, committed=True) == 1 and latest(core, committed=False) == 5
    d = body(fetch(core, 0, committed=True))["responses"][0]["partitions"][0]
    assert values(d["records"]) == [b"before"] and d["last_stable_offset"] == 1 and d["high_watermark"] == 5
    assert d["aborted_transactions"] == []
    assert marker_errors(markers(core, a, 0, commit=True, partitions=[0])) == [0]  # 5
    assert latest(core, committed=True) == 3, "b is still open"
    assert marker_errors(markers(core, b, 0, commit=False, partitions=[0])) == [0]  # 6
    assert latest(core, committed=True) == 7
    d = body(fetch(core, 0, committed=True))["responses"][0]["partitions"][0]
    assert d["last_stable_offset"] == 7
    assert values(d["records"]) == [b"before", b"v0", b"v1", b"v0", b"v1"]  # the consumer drops b's by the list
    assert d["aborted_transactions"] == [{"producer_id": b, "first_offset": 3}]
    d = body(fetch(core, 0, committed=False))["responses"][0]["partitions"][0]
    assert d["aborted_transactions"] is None


def test_a_read_committed_long_poll_wakes_when_a_marker_moves_the_lso(core: BrokerCore) -> None:
    pid = producer_id(core)
    produce(core, txn_batch(pid, 0, 0))
    waiting = fetch(core, 0, committed=True, wait_ms=30000)
    uncommitted = fetch(core, 0, committed=False, wait_ms=30000)
    assert uncommitted.body is not None, "read_uncommitted has the records at once"
    assert waiting.deferred is not None and not waiting.deferred.done
    got: list[Any] = []
    waiting.deferred.on_done(lambda v, b: got.append(b))
    markers(core, pid, 0, commit=True, partitions=[0])  # no time passes
    assert got and values(got[0]["responses"][0]["partitions"][0]["records"]) == [b"v0", b"v1"]


def test_an_incremental_session_reports_a_moved_lso(core: BrokerCore) -> None:
    pid = producer_id(core)
    produce(core, txn_batch(pid, 0, 0), partition=1)
    first = body(fetch(core, 0, committed=True, session=(0, 0), partitions=(0, 1)))
    sid = first["session_id"]
    assert sid and {p["partition_index"]: p["last_stable_offset"] for p in first["responses"][0]["partitions"]} \
        == {0: 0, 1: 0}
    assert body(fetch(core, 0, committed=True, session=(sid, 1), partitions=()))["responses"] == []
    markers(core, pid, 0, commit=False, partitions=[1])
    inc = body(fetch(core, 0, committed=True, session=(sid, 2), partitions=()))
    (p1,) = inc["responses"][0]["partitions"]
    assert p1["partition_index"] == 1 and p1["last_stable_offset"] == 3
    assert p1["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]


@pytest.mark.parametrize("bug", [False, True], ids=["correct", "marker-ack-before-replication"])
def test_markers_are_answered_after_the_isr_has_them(tmp_path: Path, bug: bool) -> None:
    core = make_core(tmp_path, *(["marker-ack-before-replication"] if bug else []),
                     **{"transaction.kip890.enable": "false"})
    p = core.partitions[TopicPartition(TOPIC, 0)]
    pid = producer_id(core)
    produce(core, txn_batch(pid, 0, 0))
    p.isr, p.replicas, p.follower_leo = [1, 2], [1, 2], {2: p.leo}  # a follower that has everything so far
    r = markers(core, pid, 0, commit=True, partitions=[0])
    if bug:
        assert r.deferred is not None and r.deferred.done, "the bug answers before replication"
        return
    assert r.deferred is not None and not r.deferred.done and p.hw == 2
    got: list[Any] = []
    r.deferred.on_done(lambda v, b: got.append(b))
    p.record_follower_fetch(2, p.leo, 1000)
    assert p.maybe_advance_hw()
    core.purgatory.check([p.tp])
    assert got and [x["error_code"] for x in got[0]["markers"][0]["topics"][0]["partitions"]] == [0]


def test_a_marker_waiting_for_its_isr_survives_a_new_epoch_of_the_same_leader(core: BrokerCore) -> None:
    """The controller shrinks the ISR while a marker waits (a follower died): new leader epoch, same
    leader, the marker still in the log. It is answered NONE once the smaller ISR has it; answering
    NOT_LEADER_OR_FOLLOWER there made the coordinator write the marker a second time."""
    p = core.partitions[TopicPartition(TOPIC, 0)]
    pid = producer_id(core)
    produce(core, txn_batch(pid, 0, 0))
    p.isr, p.replicas, p.follower_leo = [1, 2], [1, 2], {2: p.leo}
    r = markers(core, pid, 0, commit=True, partitions=[0])
    assert r.deferred is not None and not r.deferred.done
    p.leader_epoch += 1  # what ReplicaManager.become_leader does for the shrunk ISR
    p.log.epochs.assign(p.leader_epoch, p.leo)
    p.isr = [1]
    assert p.maybe_advance_hw()
    core.purgatory.check([p.tp])
    assert marker_errors(r) == [0]
    assert p.leo == 3, "one marker, not a duplicate"


def test_marker_errors_append_nothing(core: BrokerCore) -> None:
    p = core.partitions[TopicPartition(TOPIC, 0)]
    pid = producer_id(core)
    produce(core, txn_batch(pid, 3, 0))
    assert marker_errors(markers(core, pid, 3, commit=True, partitions=[0], coordinator_epoch=5)) == [0]
    leo = p.leo
    assert marker_errors(markers(core, pid, 3, commit=True, partitions=[0], coordinator_epoch=4)) == \
        [Err.TRANSACTION_COORDINATOR_FENCED]
    assert marker_errors(markers(core, pid, 2, commit=False, partitions=[0], coordinator_epoch=5)) == \
        [Err.INVALID_PRODUCER_EPOCH]
    assert marker_errors(markers(core, pid, 3, commit=False, partitions=[7], coordinator_epoch=5)) == \
        [Err.UNKNOWN_TOPIC_OR_PARTITION]
    assert p.leo == leo
    # KIP-890 part 2 (transaction version 2, WriteTxnMarkers v2): a marker must carry a bumped epoch
    produce(core, txn_batch(pid, 3, 2))
    r = core.handle(27, 2, make_message(WriteTxnMarkersRequest, 2, {"markers": [{
        "producer_id": pid, "producer_epoch": 3, "transaction_result": True, "coordinator_epoch": 5,
        "transaction_version": 2, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]}))
    assert marker_errors(r) == [Err.INVALID_PRODUCER_EPOCH]
    assert marker_errors(markers(core, pid, 4, commit=True, partitions=[0], coordinator_epoch=5)) == [0]
    assert produce(core, txn_batch(pid, 3, 4))["error_code"] == Err.INVALID_PRODUCER_EPOCH, "the old epoch is fenced"


def test_transactional_produce_checks(core: BrokerCore) -> None:
    p = core.partitions[TopicPartition(TOPIC, 0)]
    pid = producer_id(core)
    assert produce(core, txn_batch(pid, 0, 0), txn_id=None)["error_code"] == Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(core, txn_batch(pid, 1, 0))["error_code"] == 0
    leo = p.leo
    assert produce(core, txn_batch(pid, 0, 2))["error_code"] == Err.INVALID_PRODUCER_EPOCH
    assert produce(core, txn_batch(pid, 1, 2, transactional=False))["error_code"] == Err.INVALID_TXN_STATE
    assert produce(core, txn_batch(pid, 1, 5))["error_code"] == Err.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.leo == leo
    dup = produce(core, txn_batch(pid, 1, 0))
    assert dup["error_code"] == 0 and dup["base_offset"] == 0 and p.leo == leo, "a retried batch is not appended"


# --- KIP-890 part 1: the leader asks the coordinator -----------------------------------------------------
class StandInCoordinator:
    """Answers AddPartitionsToTxn v4 `verify_only` from the partitions a test says were added to each
    transaction, now or when the test releases it: these tests are about the leader's side of the
    question and its timing, which the real coordinator (`logbroker/txn/`, answering at once; see
    `test_broker_txn.py::test_kip890_*`) does not let a test hold."""

    def __init__(self, core: BrokerCore, *, hold: bool = False) -> None:
        self.core = core
        self.added: set[tuple[str, int, int, str, int]] = set()  # (txn id, producer id, epoch, topic, partition)
        self.asked: list[tuple[str, int]] = []
        self.hold = hold
        self.released = False
        core.create_local_topic("__transaction_state", 1)  # this broker leads it: it is the coordinator
        core.handlers[24] = self.handle

    def handle(self, version: int, req: Any) -> Reply:
        assert version >= 4 and all(t.verify_only for t in req.transactions)

        def answer(timed_out: bool = False) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
                {"transactional_id": t.transactional_id, "topic_results": [
                    {"name": tp.name, "results_by_partition": [
                        {"partition_index": i, "partition_error_code": 0 if (
                            t.transactional_id, t.producer_id, t.producer_epoch, tp.name, i) in self.added
                         else int(Err.INVALID_TXN_STATE)} for i in tp.partitions]} for tp in t.topics]}
                for t in req.transactions]}

        self.asked.extend((tp.name, i) for t in req.transactions for tp in t.topics for i in tp.partitions)
        if not self.hold:
            return Reply(version, answer())
        from logbroker.core.purgatory import Deferred

        d = Deferred(lambda: self.released, answer, 10**12, version, frozenset({"stand-in"}))
        return Reply(version, deferred=self.core.purgatory.add(d))

    def release(self) -> None:
        self.released = True
        self.core.purgatory.check(["stand-in"])


@pytest.mark.parametrize("bug", [False, True], ids=["correct", "no-txn-verification"])
def test_a_transaction_opens_at_a_partition_only_if_the_coordinator_added_it(tmp_path: Path, bug: bool) -> None:
    core = make_core(tmp_path, *(["no-txn-verification"] if bug else []))
    coordinator = StandInCoordinator(core)
    pid = producer_id(core)
    coordinator.added.add((TXN_ID, pid, 0, TOPIC, 0))
    assert produce(core, txn_batch(pid, 0, 0), partition=0)["error_code"] == 0
    assert produce(core, txn_batch(pid, 0, 2), partition=0)["error_code"] == 0
    got = produce(core, txn_batch(pid, 0, 0), partition=1)  # never added: a torn transaction in the making
    if bug:
        assert got["error_code"] == 0 and coordinator.asked == []
        return
    assert got["error_code"] == Err.INVALID_TXN_STATE and got["error_message"]
    assert core.partitions[TopicPartition(TOPIC, 1)].leo == 0
    assert coordinator.asked == [(TOPIC, 0), (TOPIC, 1)], "asked once per transaction opening, not per batch"


def test_batches_pipelined_behind_an_unanswered_verification_go_in_after_it_in_order(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    coordinator = StandInCoordinator(core, hold=True)
    pid = producer_id(core)
    coordinator.added.add((TXN_ID, pid, 0, TOPIC, 0))
    p = core.partitions[TopicPartition(TOPIC, 0)]
    replies = [core.handle(0, 9, make_message(ProduceRequest, 9, {
        "transactional_id": TXN_ID, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": txn_batch(pid, 0, seq)}]}]}))
        for seq in (0, 2)]
    assert all(r.deferred is not None and not r.deferred.done for r in replies) and p.leo == 0
    coordinator.release()
    results = [body(r)["responses"][0]["partition_responses"][0] for r in replies]
    assert [(x["error_code"], x["base_offset"]) for x in results] == [(0, 0), (0, 2)]
    assert p.producers.ongoing == {pid: 0}


def test_a_marker_or_a_timeout_voids_an_unanswered_verification(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    coordinator = StandInCoordinator(core, hold=True)
    pid = producer_id(core)
    coordinator.added.update({(TXN_ID, pid, 0, TOPIC, 0), (TXN_ID, pid, 0, TOPIC, 1)})
    waiting = core.handle(0, 9, make_message(ProduceRequest, 9, {
        "transactional_id": TXN_ID, "acks": 1, "timeout_ms": 60000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": txn_batch(pid, 0, 0)}]}]}))
    # the transaction ends (the coordinator aborted it) while the question is on its way
    assert marker_errors(markers(core, pid, 0, commit=False, partitions=[0])) == [0]
    timing_out = core.handle(0, 9, make_message(ProduceRequest, 9, {
        "transactional_id": TXN_ID, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 1, "records": txn_batch(pid, 0, 0)}]}]}))
    clock = core.clock
    assert isinstance(clock, ManualClock)
    clock.advance(6000)
    core.purgatory.expire(clock.monotonic_ms())
    late = body(timing_out)["responses"][0]["partition_responses"][0]
    assert late["error_code"] == Err.NOT_ENOUGH_REPLICAS, "unanswered: the client retries"
    coordinator.release()
    voided = body(waiting)["responses"][0]["partition_responses"][0]
    assert voided["error_code"] == Err.INVALID_TXN_STATE
    assert core.partitions[TopicPartition(TOPIC, 0)].producers.ongoing == {}
    assert core.partitions[TopicPartition(TOPIC, 1)].leo == 0, "a late yes appends nothing"


def test_describe_producers_shows_the_open_transaction_an_operator_must_find(core: BrokerCore) -> None:
    from kafka.protocol.admin.transactions import DescribeProducersRequest

    a, b = producer_id(core), producer_id(core)
    produce(core, txn_batch(a, 2, 0))  # 0..1, open
    produce(core, txn_batch(b, 0, 0))  # 2..3
    markers(core, b, 0, commit=True, partitions=[0], coordinator_epoch=7)
    r = body(core.handle(61, 0, make_message(DescribeProducersRequest, 0, {"topics": [
        {"name": TOPIC, "partition_indexes": [0, 9]}]})))
    p0, p9 = r["topics"][0]["partitions"]
    assert p9["error_code"] == Err.UNKNOWN_TOPIC_OR_PARTITION
    got = {x["producer_id"]: (x["producer_epoch"], x["last_sequence"], x["coordinator_epoch"],
                              x["current_txn_start_offset"]) for x in p0["active_producers"]}
    assert got == {a: (2, 1, -1, 0), b: (0, 1, 7, -1)}
    assert all(x["last_timestamp"] > 0 for x in p0["active_producers"])


def test_a_coordinator_answer_that_waited_no_time_is_taken(tmp_path: Path) -> None:
    """The coordinator's handler may put its answer in the purgatory and see it finish at once."""
    core = make_core(tmp_path)
    coordinator = StandInCoordinator(core, hold=True)
    coordinator.released = True
    pid = producer_id(core)
    coordinator.added.add((TXN_ID, pid, 0, TOPIC, 0))
    assert produce(core, txn_batch(pid, 0, 0), acks=1)["error_code"] == 0
