"""Replica reassignment (seed 003 F) as pure rules: what to write when one starts and when it ends.

The life of one moving partition, driven by `controller/operations.py`:

1. start: AR := original ∪ target (`ReplicaAssignment.reassign_to`) is written to the topic znode,
   and the partition state gets a new leader epoch so that every replica — the new ones included —
   receives a LeaderAndIsr with the new AR; new replicas start fetching from the leader.
2. wait: the leader adds each new replica to the ISR through AlterIsr once it has caught up
   (KIP-497). Seed 003 F.3.2: nothing more happens until every target replica is in the ISR.
3. complete: leadership moves into the target set if it is outside it (only to a live ISR member,
   so nothing committed is lost), the ISR drops the removed replicas, the leader epoch is bumped
   again, AR := target, and the removed replicas get StopReplica with delete.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from logbroker.coord.model import PartitionState, ReplicaAssignment
from logbroker.protocol.errors import Err


def validate_target(target: Sequence[int], current: ReplicaAssignment, state: PartitionState | None,
                    live: Collection[int], *, allow_rf_change: bool = True) -> tuple[Err, str | None]:
    """Refuse what Kafka refuses: an empty or duplicated list, new replicas on brokers that are not
    registered (a replica the partition already has may be down: a cancel must still work), a
    replication-factor change when the caller forbade it — and (ours) a new target that would drop
    the current leader while no other live ISR member is left to take over."""
    if not target:
        return Err.INVALID_REPLICA_ASSIGNMENT, "the target replica list is empty"
    if len(set(target)) != len(target):
        return Err.INVALID_REPLICA_ASSIGNMENT, f"duplicate brokers in {list(target)}"
    unknown = sorted(set(target) - set(live) - set(current.replicas))
    if unknown:
        return Err.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not alive"
    if not allow_rf_change and len(target) != len(current.original):
        return Err.INVALID_REPLICATION_FACTOR, (f"the replication factor would change from "
                                                f"{len(current.original)} to {len(target)}")
    if state is not None and state.leader >= 0:
        new = current.reassign_to(target)
        if state.leader not in new.replicas and not any(
                r in new.replicas and r in live for r in state.isr):
            return Err.INVALID_REPLICA_ASSIGNMENT, "no in-sync replica would be left to lead"
    return Err.NONE, None


def start_state(st: PartitionState, new: ReplicaAssignment, live: Collection[int],
                controller_epoch: int) -> PartitionState:
    """Step 1: the ISR keeps only members still assigned; the leader stays if it is (it normally is —
    it is only dropped when it was itself a replica being added by an unfinished earlier move); the
    leader epoch goes up so every replica learns the new AR."""
    isr = tuple(r for r in st.isr if r in new.replicas)
    leader = st.leader
    if leader not in new.replicas or leader not in live:
        leader = next((r for r in new.replicas if r in isr and r in live), -1)
    return PartitionState(leader, st.leader_epoch + 1, isr, controller_epoch)


def completion_state(st: PartitionState, target: Sequence[int], live: Collection[int],
                     controller_epoch: int) -> PartitionState | None:
    """Step 3, or None while it must wait: some target replica is not yet in the ISR, or no target
    replica is a live ISR member that could lead. A new leader is the first eligible replica in the
    requested target order (its preferred replica first)."""
    if not all(r in st.isr for r in target):
        return None
    isr = tuple(r for r in st.isr if r in target)
    if st.leader in target and st.leader in live:
        leader = st.leader
    else:
        leader = next((r for r in target if r in isr and r in live), -1)
        if leader == -1:
            return None
    return PartitionState(leader, st.leader_epoch + 1, isr, controller_epoch)
