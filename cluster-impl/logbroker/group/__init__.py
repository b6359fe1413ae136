"""Consumer groups: the group coordinator (Kafka's classic, "generic" group protocol).

A group's coordinator is the leader of partition `java_hash(group) % offsets.topic.num.partitions`
of the internal topic `__consumer_offsets`. Offset commits and group metadata are records appended
to that partition and acknowledged only once the partition's HW covers them (acks=all), so they are
replicated like any data; the broker that becomes the partition's leader loads the partition and
carries on with the groups and offsets it finds there.

- `records.py`: the partition a group lives in, and the records' encoding (pure).
- `state.py`: one group's state machine — Empty → PreparingRebalance → CompletingRebalance →
  Stable — with members, generations, rebalance and session timeouts, and static members
  (KIP-345, `group.instance.id`) (pure; time is passed in).
- `coordinator.py`: the requests (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  OffsetCommit, OffsetFetch, ListGroups, DescribeGroups), loading and unloading partitions, and the
  writes; it reaches the broker only through `BrokerCore` (partitions, purgatory, clock).

May import `logbroker.core` (partitions, purgatory), `logbroker.protocol.errors` and kafka-python's
record codec; nothing imports it but `core/broker.py`.
"""
