"""Issue 27's group coordinator failover on real processes (`group_failover.py` acts it out): five
members of three client libraries, the coordinator's broker SIGKILLed after 1,000 of 3,000
records and restarted 10 s later; every record must be read and every partition's committed
offset must reach its log end.

What it found: the controller gives every partition a new leader epoch when a broker dies (a new
leader, or the same one with a smaller ISR). kafka-python 3.0 then validates its position with
OffsetForLeaderEpoch (KIP-320), which the broker did not offer to clients, and retries forever
without fetching: its partition stopped for good (333 records unread, the partition's commit stuck
at 160 of 500, in 3 runs of 3 before the fix; 0 of 6 after, the coordinator on each broker in
turn). The broker now answers API 23 (`core/leader_epoch_api.py`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from group_failover import run
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper


@pytest.mark.parametrize("churn", [False, True], ids=["steady", "member-replaced"])
def test_five_members_of_three_libraries_read_everything_after_the_coordinator_dies(
        tmp_path: Path, zookeeper: LocalZooKeeper, churn: bool) -> None:
    """`member-replaced`: the aiokafka member dies with the coordinator and a new one joins, so the
    group rebalances across the failover (its old member expires on the new coordinator); commits
    refused meanwhile and records read again are at-least-once delivery, not failures."""
    out = run(tmp_path, zookeeper, churn=churn)
    assert out.clean, out.describe()
