"""KIP-207: a leader does not answer a client's ListOffsets while its high watermark is behind the
offset its leader epoch began at; it answers OFFSET_NOT_AVAILABLE (retriable) instead.

Why: a replica that becomes leader keeps the HW it had as a follower, which the old leader's next
fetch response would have raised. The old leader may already have told a client that higher HW
(an acks=all produce answered at 3), so a new leader answering its own (1) makes a partition's end
go backwards across a failover. CI saw exactly that on real processes (`test_repl_txn.py`: latest
1 where 3 was acknowledged). Once the followers fetch from the new leader, the HW passes the epoch
start and the answer is at least every end answered before.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafka.protocol.consumer import ListOffsetsRequest
from logbroker.core.broker import BrokerCore
from logbroker.core.partition import TopicPartition
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from test_min_isr_hw import _leader_and_isr, _values, one_broker, replicating

TP = TopicPartition("t", 0)


def _latest(core: BrokerCore, replica_id: int = -1, timestamp: int = -1) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v2 for t-0, read_uncommitted: latest (-1), earliest (-2) or
    the first record at or after a time."""
    req = make_message(ListOffsetsRequest, 2, {"replica_id": replica_id, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
    body = core.list_offsets(2, req).body
    assert body is not None
    r = body["topics"][0]["partitions"][0]
    return int(r["error_code"]), int(r["offset"])


def test_a_new_leader_epoch_hides_the_end_until_the_hw_reaches_its_start(tmp_path: Path) -> None:
    core = one_broker(tmp_path)

    async def run() -> None:
        rm = await replicating(core)
        assert (await rm.handle_internal(_leader_and_isr(1, [1, 2])))["error"] == 0
        p = core.partitions[TP]
        p.append_as_leader(_values(5))
        rm.on_leader_append(p)
        assert (p.leo, p.hw) == (5, 0)
        assert _latest(core) == (0, 0), "epoch 1 began at 0: its HW is an answer"

        # a new epoch begins at 5 (the same leader here; a follower elected leader is the usual case)
        assert (await rm.handle_internal(_leader_and_isr(2, [1, 2])))["error"] == 0
        assert p.epoch_start_offset == 5 and p.hw == 0
        assert _latest(core) == (int(Err.OFFSET_NOT_AVAILABLE), -1)
        assert _latest(core, replica_id=2) == (0, 5), "a replica's ListOffsets is the log end, never refused"
        assert _latest(core, timestamp=-2) == (0, 0), "the log start does not depend on the HW"
        assert _latest(core, timestamp=0)[0] == int(Err.OFFSET_NOT_AVAILABLE), "no record below the HW yet"

        p.record_follower_fetch(2, 3, 1_000)
        rm.advance_hw(p)
        assert p.hw == 3 and _latest(core)[0] == int(Err.OFFSET_NOT_AVAILABLE), "still below the epoch start"
        p.record_follower_fetch(2, 5, 1_000)
        rm.advance_hw(p)
        assert _latest(core) == (0, 5)
        assert _latest(core, timestamp=0) == (0, 0)
        await rm.stop_async()

    try:
        asyncio.run(run())
    finally:
        core.close()
