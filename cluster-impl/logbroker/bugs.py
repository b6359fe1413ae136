"""Bug switches: named, off-by-default re-creations of historic replication mistakes.

They exist so the harness can prove that it catches each one (the "detection matrix"). Each switch
must change behaviour only in the situation it concerns; its comment below names the rule of Kafka's
public design it violates: a KIP by number (KIP-101/279 truncation, KIP-497 AlterIsr, KIP-98
transactions, KIP-966 strict min ISR), or a "seed" document, numbered as in cluster-impl/README.md
(001 and 003 Kafka's replication design pages, 002 KIP-497, 004 KIP-279). Brokers receive them as
`--bug NAME` (repeatable).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Bug(StrEnum):
    #: Follower truncates its log to its own HW when it becomes follower, as before KIP-101
    #: (seed 004, KIP-279 "Motivation"); correct behaviour asks the leader OffsetForLeaderEpoch.
    TRUNCATE_TO_HW = "truncate-to-hw"
    #: acks=all is answered once the leader has written locally, before the ISR has it
    #: (seed 001 "sync replication": a message is committed only when every ISR replica has it).
    ACK_BEFORE_REPLICATION = "ack-before-replication"
    #: The leader shrinks its ISR by itself, without the controller, and advances HW with it,
    #: as before KIP-497 (seed 002: only the controller writes ISR; shrink applies once committed).
    LOCAL_ISR_SHRINK = "local-isr-shrink"
    #: Brokers obey LeaderAndIsr requests and fetches that carry stale leader or controller epochs:
    #: the zombie leader/controller of seed 003's discussion, section 3.
    STALE_EPOCH_ACCEPTED = "stale-epoch-accepted"
    #: The last stable offset ignores open transactions (LSO = HW), so read_committed consumers read
    #: records of transactions that are still open and may yet abort: the aborted reads (G1a) of
    #: Jepsen's Redpanda 21.10.1 analysis (jepsen.io/analyses/redpanda-21.10.1, 2022).
    LSO_IGNORES_OPEN_TXNS = "lso-ignores-open-txns"
    #: WriteTxnMarkers is answered once the leader has written the marker, before its ISR has it (KIP-98's
    #: design writes markers with acks=all): the coordinator completes the transaction, the leader dies,
    #: the new leader never had the marker, and the transaction stays open there for good (a hanging
    #: transaction, KIP-664's subject: the LSO stops and read_committed consumers stall) or a later
    #: marker decides it differently.
    MARKER_ACK_BEFORE_REPLICATION = "marker-ack-before-replication"
    #: A partition leader lets any transactional produce open a transaction, without asking the
    #: coordinator whether the partition is in the producer's transaction (Kafka before KIP-890): a
    #: delayed write of a finished transaction joins the producer's next one, Jepsen's torn
    #: transactions in Bufstream 0.1.0 (jepsen.io/analyses/bufstream-0.1.0, 2024).
    NO_TXN_VERIFICATION = "no-txn-verification"
    #: A transaction coordinator that takes over a partition of `__transaction_state` does not resume
    #: the transactions it finds in PrepareCommit/PrepareAbort: their markers are never (all) written,
    #: the transactions hang, the LSO of their partitions stops and read_committed consumers stall,
    #: and the producer is told CONCURRENT_TRANSACTIONS for good (KAFKA-16352, "Transaction may get
    #: stuck in PrepareCommit or PrepareAbort state", Kafka 3.7).
    FORGET_PREPARED_TXNS = "forget-prepared-txns"
    #: The controller ignores that a broker came back without its log directory, keeping it in the ISR
    #: and electing it, and knows no eligible leader replicas: Kafka's ZooKeeper mode (KIP-966 "Motivation").
    LOST_DISK_IN_ISR = "lost-disk-in-isr"


def parse_bugs(names: Iterable[str]) -> frozenset[Bug]:
    """Validate bug names; an unknown one is a ValueError that lists the known ones."""
    out = set()
    for name in names:
        try:
            out.add(Bug(name))
        except ValueError:
            known = ", ".join(b.value for b in Bug)
            raise ValueError(f"unknown bug switch {name!r}; known: {known}") from None
    return frozenset(out)
