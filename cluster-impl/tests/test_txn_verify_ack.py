"""An acks=all transactional produce that waited for the coordinator's KIP-890 answer is answered
only once its ISR has the records — found by the simulator (`logsim/txn_run.py`, seed 17): the
coordinator's answer arrived, the leader appended, and the append's own purgatory check completed the
request before its wait for the HW was registered; the answer (built from results still being filled
in) then said NONE with the new offset, the leader died, and the new leader never had the records
of a transaction its producer had committed."""

from __future__ import annotations

from pathlib import Path

from kafka.protocol.producer import ProduceRequest
from logbroker.core.partition import TopicPartition
from logbroker.protocol.apis import make_message
from test_txn_core import TOPIC, TXN_ID, StandInCoordinator, body, make_core, producer_id
from test_txn_partition import txn_batch


def test_an_acks_all_produce_waits_for_its_isr_after_the_coordinator_answers(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    coordinator = StandInCoordinator(core, hold=True)  # the answer comes later, as from another broker
    pid = producer_id(core)
    coordinator.added.add((TXN_ID, pid, 0, TOPIC, 0))
    p = core.partitions[TopicPartition(TOPIC, 0)]
    p.isr = [1, 2]  # a follower that has not fetched yet holds the HW back
    p.follower_leo[2] = 0
    reply = core.handle(0, 9, make_message(ProduceRequest, 9, {
        "transactional_id": TXN_ID, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": txn_batch(pid, 0, 0)}]}]}))
    assert reply.deferred is not None and not reply.deferred.done
    coordinator.release()
    assert p.leo == 2 and p.hw == 0
    assert not reply.deferred.done, "answered before the ISR has the records"
    p.follower_leo[2] = p.leo
    p.maybe_advance_hw()
    core.purgatory.check([p.tp])
    got = body(reply)["responses"][0]["partition_responses"][0]
    assert (got["error_code"], got["base_offset"]) == (0, 0)
