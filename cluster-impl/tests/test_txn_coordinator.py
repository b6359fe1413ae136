"""The transaction coordinator inside a real standalone `BrokerCore`, sans-IO (no sockets, a manual
clock): the transaction APIs as clients send them (kafka-python's classes), the markers it writes to
the partitions it leads itself, fencing, timeouts, KIP-890 part 2, bad input, and a restart that
finds a decided transaction in `__transaction_state`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from logbroker.bugs import parse_bugs
from logbroker.core.broker import BrokerCore
from logbroker.core.clock import ManualClock
from logbroker.core.partition import TopicPartition
from logbroker.core.producer_id import ProducerIdBlock, ProducerIdBlocks
from logbroker.group.records import partition_for
from logbroker.log.control import read_marker
from logbroker.protocol.apis import APIS, make_message
from logbroker.protocol.errors import Err
from test_txn_core import TOPIC, body, fetch, latest, make_core, produce, values
from test_txn_partition import txn_batch

TID = "tx"
NO_ACKS_TOPIC = "needs-two"  # min.insync.replicas 2 on one broker: its markers are refused until altered


def call(core: BrokerCore, key: int, version: int, fields: dict[str, Any]) -> Any:
    return body(core.handle(key, version, make_message(APIS[key].request, version, fields)))


def init(core: BrokerCore, tid: str = TID, timeout_ms: int = 60000, version: int = 4) -> dict[str, Any]:
    return dict(call(core, 22, version, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms,
                                         "producer_id": -1, "producer_epoch": -1}))


def add(core: BrokerCore, pid: int, epoch: int, partitions: list[tuple[str, int]], tid: str = TID,
        version: int = 3) -> list[int]:
    topics: dict[str, list[int]] = {}
    for t, i in partitions:
        topics.setdefault(t, []).append(i)
    r = call(core, 24, version, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                 "v3_and_below_producer_epoch": epoch,
                                 "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return [p["partition_error_code"] for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]]


def end(core: BrokerCore, pid: int, epoch: int, commit: bool, tid: str = TID, version: int = 3) -> dict[str, Any]:
    return dict(call(core, 26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                         "committed": commit}))


def describe(core: BrokerCore, tid: str = TID) -> dict[str, Any]:
    return dict(call(core, 65, 0, {"transactional_ids": [tid]})["transaction_states"][0])


def markers_in(core: BrokerCore, topic: str, partition: int) -> list[tuple[int, int, bool]]:
    """(producer id, epoch, commit) of every control batch of a partition, in log order."""
    p = core.partitions[TopicPartition(topic, partition)]
    out = []
    for h, raw in p.log.batches():
        m = read_marker(raw, h) if h.is_control else None
        if m is not None:
            out.append((h.producer_id, h.producer_epoch, m.commit))
    return out


def coordinated(c: BrokerCore) -> BrokerCore:
    found = call(c, 10, 1, {"key": TID, "key_type": 1})  # creates __transaction_state, as a client's lookup does
    assert found["error_code"] == 0 and found["node_id"] == 1
    return c


@pytest.fixture
def core(tmp_path: Path) -> BrokerCore:
    return coordinated(make_core(tmp_path))


def test_a_committed_and_an_aborted_transaction(core: BrokerCore) -> None:
    got = init(core)
    assert got["error_code"] == 0 and got["producer_epoch"] == 0
    pid = got["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0), (TOPIC, 1)]) == [0, 0]
    assert describe(core)["transaction_state"] == "Ongoing"
    assert produce(core, txn_batch(pid, 0, 0), partition=0)["error_code"] == 0  # verified by this coordinator
    assert latest(core, committed=True) == 0  # open: the LSO holds
    assert end(core, pid, 0, commit=True)["error_code"] == 0
    d = describe(core)
    assert (d["transaction_state"], d["producer_epoch"], d["topics"]) == ("CompleteCommit", 0, [])
    assert markers_in(core, TOPIC, 0) == [(pid, 0, True)] and markers_in(core, TOPIC, 1) == [(pid, 0, True)]
    assert values(body(fetch(core, 0, committed=True))["responses"][0]["partitions"][0]["records"]) == [b"v0", b"v1"]

    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]  # the next transaction, same epoch (TV0 clients)
    assert produce(core, txn_batch(pid, 0, 2), partition=0)["error_code"] == 0
    assert end(core, pid, 0, commit=False)["error_code"] == 0
    assert markers_in(core, TOPIC, 0) == [(pid, 0, True), (pid, 0, False)]
    fetched = body(fetch(core, 0, committed=True))["responses"][0]["partitions"][0]
    assert [a["producer_id"] for a in fetched["aborted_transactions"]] == [pid]
    assert end(core, pid, 0, commit=False)["error_code"] == 0  # a retry of the finished end
    assert end(core, pid, 0, commit=True)["error_code"] == Err.INVALID_TXN_STATE


def test_a_new_incarnation_fences_the_old_one_and_aborts_its_open_transaction(core: BrokerCore) -> None:
    first = init(core)
    pid = first["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]
    assert produce(core, txn_batch(pid, 0, 0))["error_code"] == 0
    again = init(core)  # another process with the same transactional.id
    assert again["error_code"] == Err.CONCURRENT_TRANSACTIONS  # the open transaction is aborted first
    assert markers_in(core, TOPIC, 0) == [(pid, 1, False)]  # written with the fenced epoch
    assert describe(core)["transaction_state"] == "CompleteAbort"
    again = init(core)
    assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (0, pid, 2)
    # the old incarnation, at every step of a transaction (its error by API version, as Kafka)
    assert add(core, pid, 0, [(TOPIC, 1)], version=2) == [Err.PRODUCER_FENCED]
    assert add(core, pid, 0, [(TOPIC, 1)], version=1) == [Err.INVALID_PRODUCER_EPOCH]
    assert end(core, pid, 0, commit=True)["error_code"] == Err.PRODUCER_FENCED
    assert end(core, pid, 0, commit=True, version=1)["error_code"] == Err.INVALID_PRODUCER_EPOCH
    assert produce(core, txn_batch(pid, 0, 2))["error_code"] == Err.INVALID_PRODUCER_EPOCH
    assert latest(core, committed=True) == latest(core, committed=False)  # nothing hangs


def test_init_producer_id_waits_for_a_producer_id_block_with_a_retriable_error(core: BrokerCore) -> None:
    """A clustered broker's ids come from blocks claimed in ZooKeeper: until one is at hand, both
    kinds of InitProducerId answer COORDINATOR_LOAD_IN_PROGRESS (clients retry it) and change
    nothing; the first ask starts one claim, and the answers use the block once it has arrived."""
    asked: list[str] = []
    core.producer_ids = ProducerIdBlocks(lambda: asked.append("claim"))
    idempotent = dict(call(core, 22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000}))
    assert (idempotent["error_code"], idempotent["producer_id"]) == (Err.COORDINATOR_LOAD_IN_PROGRESS, -1)
    assert init(core)["error_code"] == Err.COORDINATOR_LOAD_IN_PROGRESS
    assert describe(core)["error_code"] == Err.TRANSACTIONAL_ID_NOT_FOUND  # no state was made for it
    assert asked == ["claim"]  # one claim in flight, however many ask
    core.producer_ids.add(ProducerIdBlock(broker=1, first=5000, last=5999))
    idempotent = dict(call(core, 22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000}))
    assert (idempotent["error_code"], idempotent["producer_id"]) == (0, 5000)
    got = init(core)
    assert (got["error_code"], got["producer_id"], got["producer_epoch"]) == (0, 5001, 0)


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_coordinator(core: BrokerCore) -> None:
    clock = core.clock
    assert isinstance(clock, ManualClock)
    pid = init(core, timeout_ms=5000)["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]
    assert produce(core, txn_batch(pid, 0, 0))["error_code"] == 0
    clock.advance(4999)
    core.tick()
    assert describe(core)["transaction_state"] == "Ongoing"
    clock.advance(10_001)  # past the timeout and the next cleanup scan
    core.tick()
    d = describe(core)
    assert (d["transaction_state"], d["producer_epoch"]) == ("CompleteAbort", 1)
    assert markers_in(core, TOPIC, 0) == [(pid, 1, False)]
    assert latest(core, committed=True) == latest(core, committed=False)  # the LSO moved on
    assert end(core, pid, 0, commit=True)["error_code"] == Err.PRODUCER_FENCED  # the producer learns it


def test_kip890_part2_bumps_the_epoch_at_every_end_for_endtxn_v5(core: BrokerCore) -> None:
    pid = init(core)["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]
    assert produce(core, txn_batch(pid, 0, 0))["error_code"] == 0
    done = end(core, pid, 0, commit=True, version=5)
    assert (done["error_code"], done["producer_id"], done["producer_epoch"]) == (0, pid, 1)
    assert markers_in(core, TOPIC, 0) == [(pid, 1, True)]  # the marker carries the new epoch
    retry = end(core, pid, 0, commit=True, version=5)  # its answer was lost: the same answer again
    assert (retry["error_code"], retry["producer_epoch"]) == (0, 1)
    # a late write of the finished transaction is fenced at the partition, not folded into the next
    assert produce(core, txn_batch(pid, 0, 2))["error_code"] == Err.INVALID_PRODUCER_EPOCH
    assert add(core, pid, 1, [(TOPIC, 0)]) == [0]
    assert produce(core, txn_batch(pid, 1, 0))["error_code"] == 0
    assert end(core, pid, 1, commit=False, version=5)["producer_epoch"] == 2


def test_kip890_off_keeps_the_epoch(tmp_path: Path) -> None:
    core = coordinated(make_core(tmp_path, **{"transaction.kip890.enable": "false"}))
    pid = init(core)["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]
    assert end(core, pid, 0, commit=True, version=5)["producer_epoch"] == 0


def test_bad_input_gets_kafka_errors_and_appends_nothing(core: BrokerCore) -> None:
    """An unknown transactional id, EndTxn with no transaction, a wrong epoch: each a Kafka error code,
    nothing in any partition (the data partitions and __transaction_state alike)."""
    pid = init(core)["producer_id"]
    state = core.partitions[TopicPartition("__transaction_state", partition_for(TID, 50))]
    before = (state.leo, core.partitions[TopicPartition(TOPIC, 0)].leo)
    assert add(core, pid, 0, [(TOPIC, 0)], tid="nobody") == [Err.INVALID_PRODUCER_ID_MAPPING]
    assert end(core, pid, 0, commit=True, tid="nobody")["error_code"] == Err.INVALID_PRODUCER_ID_MAPPING
    assert describe(core, "nobody")["error_code"] == Err.TRANSACTIONAL_ID_NOT_FOUND
    assert end(core, pid, 0, commit=True)["error_code"] == Err.INVALID_TXN_STATE  # nothing begun
    assert add(core, pid, 7, [(TOPIC, 0)]) == [Err.PRODUCER_FENCED]
    assert add(core, pid + 1, 0, [(TOPIC, 0)]) == [Err.INVALID_PRODUCER_ID_MAPPING]
    assert add(core, pid, 0, [(TOPIC, 0), ("nowhere", 0)]) == [Err.OPERATION_NOT_ATTEMPTED,
                                                               Err.UNKNOWN_TOPIC_OR_PARTITION]
    assert init(core, "")["error_code"] == Err.INVALID_REQUEST
    assert init(core, timeout_ms=900_001)["error_code"] == Err.INVALID_TRANSACTION_TIMEOUT
    assert call(core, 25, 2, {"transactional_id": TID, "producer_id": pid, "producer_epoch": 3,
                              "group_id": "g"})["error_code"] == Err.PRODUCER_FENCED
    assert (state.leo, core.partitions[TopicPartition(TOPIC, 0)].leo) == before


def test_consume_transform_produce_offsets_become_visible_only_with_the_commit(core: BrokerCore) -> None:
    found = call(core, 10, 1, {"key": "g", "key_type": 0})
    assert found["error_code"] == 0
    pid = init(core)["producer_id"]
    assert call(core, 25, 3, {"transactional_id": TID, "producer_id": pid, "producer_epoch": 0,
                              "group_id": "g"})["error_code"] == 0

    def commit_offset(offset: int) -> int:
        r = call(core, 28, 3, {"transactional_id": TID, "group_id": "g", "producer_id": pid, "producer_epoch": 0,
                               "generation_id": -1, "member_id": "", "group_instance_id": None,
                               "topics": [{"name": TOPIC, "partitions": [
                                   {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                                    "committed_metadata": ""}]}]})
        return int(r["topics"][0]["partitions"][0]["error_code"])

    def fetched(stable: bool) -> tuple[int, int]:
        r = call(core, 9, 7, {"group_id": "g", "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                              "require_stable": stable})
        p = r["topics"][0]["partitions"][0]
        return int(p["error_code"]), int(p["committed_offset"])

    assert commit_offset(42) == 0
    assert fetched(False) == (0, -1)  # pending: not visible yet
    assert fetched(True) == (Err.UNSTABLE_OFFSET_COMMIT, -1)  # KIP-447: a read_committed consumer waits
    assert end(core, pid, 0, commit=False)["error_code"] == 0
    assert fetched(True) == (0, -1)  # aborted: dropped
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]
    assert call(core, 25, 3, {"transactional_id": TID, "producer_id": pid, "producer_epoch": 0,
                              "group_id": "g"})["error_code"] == 0
    assert commit_offset(43) == 0
    assert end(core, pid, 0, commit=True)["error_code"] == 0
    assert fetched(True) == (0, 43)
    again = restart(core)  # reads both transactions back from the log
    r = body(again.handle(9, 7, make_message(APIS[9].request, 7, {
        "group_id": "g", "topics": [{"name": TOPIC, "partition_indexes": [0]}], "require_stable": True})))
    assert r["topics"][0]["partitions"][0]["committed_offset"] == 43


def restart(core: BrokerCore, *bugs: str) -> BrokerCore:
    """The same broker, closed and started again on its log dirs (with `bugs` switched on)."""
    core.close()
    c = BrokerCore(replace(core.config, bugs=parse_bugs(bugs)), core.clock)
    c.load_partitions()
    c.replication.start()  # type: ignore[attr-defined]
    return c


@pytest.mark.parametrize("bug", [False, True], ids=["correct", "forget-prepared-txns"])
def test_a_coordinator_that_takes_over_finishes_a_decided_transaction(core: BrokerCore, bug: bool) -> None:
    """PrepareCommit is written, but a partition refuses its marker (its ISR is below
    min.insync.replicas); the broker restarts. The coordinator that loads `__transaction_state` must
    send the markers again and complete the commit once the partition takes them (KAFKA-16352's
    stuck transactions, the forget-prepared-txns switch, stay in PrepareCommit for good)."""
    call(core, 19, 4, {"topics": [{"name": NO_ACKS_TOPIC, "num_partitions": 1, "replication_factor": 1,
                                   "assignments": [], "configs": [{"name": "min.insync.replicas", "value": "2"}]}],
                       "timeout_ms": 1000, "validate_only": False})
    pid = init(core)["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0), (NO_ACKS_TOPIC, 0)]) == [0, 0]
    assert produce(core, txn_batch(pid, 0, 0))["error_code"] == 0
    assert end(core, pid, 0, commit=True)["error_code"] == 0  # decided; one marker cannot be written
    d = describe(core)
    assert d["transaction_state"] == "PrepareCommit" and d["topics"] == [{"topic": NO_ACKS_TOPIC, "partitions": [0]}]
    core = restart(core, *(["forget-prepared-txns"] if bug else []))
    call(core, 33, 1, {"resources": [{"resource_type": 2, "resource_name": NO_ACKS_TOPIC, "configs": [
        {"name": "min.insync.replicas", "value": "1"}]}], "validate_only": False})
    assert isinstance(core.clock, ManualClock)
    for _ in range(3):
        core.clock.advance(200)
        core.tick()
    state = describe(core)["transaction_state"]
    if bug:
        assert state == "PrepareCommit" and markers_in(core, NO_ACKS_TOPIC, 0) == []
        assert end(core, pid, 0, commit=True)["error_code"] == Err.CONCURRENT_TRANSACTIONS  # for good
    else:
        assert state == "CompleteCommit" and markers_in(core, NO_ACKS_TOPIC, 0) == [(pid, 0, True)]
        assert add(core, pid, 0, [(TOPIC, 1)]) == [0]  # the producer carries on


def test_list_and_describe_show_a_hanging_transaction(core: BrokerCore) -> None:
    pid = init(core)["producer_id"]
    other = init(core, "other")["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]
    listed = call(core, 66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
    assert {(t["transactional_id"], t["transaction_state"]) for t in listed["transaction_states"]} == {
        (TID, "Ongoing"), ("other", "Empty")}
    assert isinstance(core.clock, ManualClock)
    core.clock.advance(3000)
    old = call(core, 66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": 2000})
    assert [t["producer_id"] for t in old["transaction_states"]] == [pid] and other != pid
    bad = call(core, 66, 0, {"state_filters": ["Sleeping"], "producer_id_filters": []})
    assert bad["unknown_state_filters"] == ["Sleeping"] and bad["transaction_states"] == []
    d = describe(core)
    assert (d["transaction_state"], d["topics"], d["transaction_timeout_ms"]) == (
        "Ongoing", [{"topic": TOPIC, "partitions": [0]}], 60000)


def test_a_leader_asks_this_coordinator_to_verify(core: BrokerCore) -> None:
    """AddPartitionsToTxn v4 `verify_only` (KIP-890 part 1), the question a partition leader asks."""
    pid = init(core)["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]

    def verify(epoch: int) -> list[int]:
        r = call(core, 24, 4, {"transactions": [{"transactional_id": TID, "producer_id": pid, "producer_epoch": epoch,
                                                 "verify_only": True, "topics": [{"name": TOPIC,
                                                                                  "partitions": [0, 1]}]}]})
        return [p["partition_error_code"] for t in r["results_by_transaction"][0]["topic_results"]
                for p in t["results_by_partition"]]

    assert verify(0) == [0, Err.TRANSACTION_ABORTABLE]
    assert verify(1) == [Err.PRODUCER_FENCED, Err.PRODUCER_FENCED]
    assert describe(core)["topics"] == [{"topic": TOPIC, "partitions": [0]}]  # verifying adds nothing



def test_a_new_leader_epoch_of_the_same_leader_keeps_a_waiting_end_and_its_decision(core: BrokerCore) -> None:
    """The controller shrinks `__transaction_state`'s ISR (a follower died): new leader epoch, same
    leader. An EndTxn waiting for its PrepareCommit to be replicated is answered NONE, and the
    transaction completes, as the group coordinator keeps its groups (core/coordinator_partitions.py)."""
    pid = init(core)["producer_id"]
    assert add(core, pid, 0, [(TOPIC, 0)]) == [0]
    state = core.partitions[TopicPartition("__transaction_state", partition_for(TID, 50))]
    state.isr = [1, 2]  # a follower that has not fetched holds the HW back
    state.follower_leo[2] = state.hw
    waiting = core.handle(26, 3, make_message(APIS[26].request, 3, {
        "transactional_id": TID, "producer_id": pid, "producer_epoch": 0, "committed": True}))
    assert waiting.deferred is not None and not waiting.deferred.done
    state.leader_epoch += 1  # what ReplicaManager.become_leader does for the shrunk ISR
    state.log.epochs.assign(state.leader_epoch, state.leo)
    state.isr = [1]
    core.tick()
    state.maybe_advance_hw()
    core.purgatory.check([state.tp])
    assert body(waiting)["error_code"] == 0
    core.tick()
    assert describe(core)["transaction_state"] == "CompleteCommit"
