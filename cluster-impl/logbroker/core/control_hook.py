"""Who hears of a transaction marker written to a partition (issue 27, TXN-CONTRACT item 2).

The group coordinator keeps a producer's transactional offset commits (TxnOffsetCommit) pending
until the transaction ends: a COMMIT marker on their `__consumer_offsets` partition makes them
visible, an ABORT drops them. The partition side does not know about groups, so it announces each
marker through this Protocol, as Kafka's WriteTxnMarkers handler calls the group coordinator's
`onTransactionCompleted`.

When it is called: on the leader, once a marker of a WriteTxnMarkers request has been appended AND
replicated to the ISR (the moment the coordinator is told it succeeded), for every partition, so a
listener filters the topics it cares about. It is not called for markers a follower copies, nor when
a replica becomes leader: a coordinator that takes over a partition reads its log
(`logbroker.log.control.read_marker` decodes the markers there), as Kafka's group loading does.
A marker may be announced twice (a coordinator retries a request whose answer was lost): a listener
must make the second one a no-op.
"""

from __future__ import annotations

from typing import Protocol

from logbroker.core.names import TopicPartition


class ControlBatchListener(Protocol):
    def on_control_batch(self, tp: TopicPartition, producer_id: int, producer_epoch: int, commit: bool,
                         offset: int) -> None:
        """A COMMIT (`commit`) or ABORT marker of `producer_id` at `producer_epoch` sits at `offset` of
        `tp`, replicated to its ISR."""
        ...


class IgnoreControlBatches:
    """The default listener: nobody keeps transactional state outside the partitions."""

    def on_control_batch(self, tp: TopicPartition, producer_id: int, producer_epoch: int, commit: bool,
                         offset: int) -> None:
        return None
