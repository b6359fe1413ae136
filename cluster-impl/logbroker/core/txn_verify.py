"""KIP-890 part 1 on the partition leader: is this partition part of the producer's transaction?

Kafka's transaction protocol lets a transactional produce reach a partition that the coordinator
never added to the transaction (a client bug, or a produce delayed past its transaction's end): the
records then sit outside any transaction the coordinator will ever end, or, worse, inside the
producer's *next* one — Jepsen's torn transactions in Bufstream 0.1.0. KIP-890's defence: before a
producer's first transactional batch opens a transaction at a partition, the leader asks the
coordinator (AddPartitionsToTxn v4+, `verify_only`, the broker-to-broker batch form) whether the
partition is in the producer's ongoing transaction at that epoch; only a yes lets the batch in.
Once the transaction is open here, later batches need no question (Kafka's cache is the open
transaction itself); a marker for the producer voids an answer still on its way
(`ProducerStateTable.begin_verification`).

The coordinator of a transactional id leads partition `abs(javaHash(id)) % n` of
`__transaction_state` (n from the metadata, else `transaction.state.log.num.partitions`), the rule
groups use. A coordinator on this broker is asked in-process; another broker through the
replication layer's `ask_broker` (its connections, the simulator's network in simulation). Answers
become produce errors as Kafka maps them for clients of Produce <= v10: INVALID_TXN_STATE (not in the
transaction), INVALID_PRODUCER_EPOCH (fenced), and NOT_ENOUGH_REPLICAS for what a retry may cure
(no coordinator, a coordinator loading or moving, CONCURRENT_TRANSACTIONS, a network error). A
coordinator that does not serve AddPartitionsToTxn v4 is not asked again for that request and the
batch goes in, as Kafka does for brokers without verification.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from logbroker.core.leader_host import Answer, LeaderHost
from logbroker.core.names import TopicPartition
from logbroker.group.records import partition_for
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
ADD_PARTITIONS_TO_TXN, VERIFY_VERSION = 24, 4

_RETRIABLE = frozenset({Err.NETWORK_EXCEPTION, Err.COORDINATOR_LOAD_IN_PROGRESS, Err.COORDINATOR_NOT_AVAILABLE,
                        Err.NOT_COORDINATOR, Err.CONCURRENT_TRANSACTIONS, Err.REQUEST_TIMED_OUT})


def _err(code: int) -> Err:
    try:
        return Err(code)
    except ValueError:
        return Err.UNKNOWN_SERVER_ERROR


def produce_error(err: Err) -> Err:
    """A coordinator's verification answer as a produce error (Kafka's ReplicaManager, Produce <= v10)."""
    if err == Err.PRODUCER_FENCED:
        return Err.INVALID_PRODUCER_EPOCH
    if err == Err.TRANSACTION_ABORTABLE:
        return Err.INVALID_TXN_STATE
    if err in _RETRIABLE:
        return Err.NOT_ENOUGH_REPLICAS
    return err


class TxnVerifier:
    def __init__(self, core: LeaderHost) -> None:
        self.core = core

    def coordinator(self, transactional_id: str) -> int:
        """The broker that coordinates `transactional_id`, or -1 if none is known."""
        parts = self.core.metadata.topics.get(TXN_TOPIC, {})
        n = len(parts) or self.core.config.transaction_state_log_num_partitions
        meta = parts.get(partition_for(transactional_id, n))
        return meta.leader if meta is not None else -1

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, tps: list[TopicPartition],
               done: Callable[[dict[TopicPartition, Err]], None]) -> None:
        """Ask; `done` gets a produce error per partition (NONE: it may go in), once."""
        coordinator = self.coordinator(transactional_id)
        if coordinator < 0:
            done(dict.fromkeys(tps, Err.NOT_ENOUGH_REPLICAS))
            return
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": True,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]}

        def answer(resp: Any) -> None:
            done(self._errors(resp, tps))

        if coordinator == self.core.config.broker_id:
            self._ask_here(body, answer)
        else:
            self.core.replication.ask_broker(coordinator, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
                                             VERIFY_VERSION, body, answer)

    def _ask_here(self, body: dict[str, Any], answer: Answer) -> None:
        handler = self.core.handlers.get(ADD_PARTITIONS_TO_TXN)
        if handler is None:
            answer(_Unsupported())
            return
        reply = handler(VERIFY_VERSION, make_message(AddPartitionsToTxnRequest, VERIFY_VERSION, body))

        def decoded(version: int, b: dict[str, Any] | None) -> None:
            answer(None if b is None else make_message(AddPartitionsToTxnResponse, version, b))

        if reply.deferred is not None:
            if reply.deferred.done:  # finished as the handler put it in the purgatory: build its answer again
                decoded(reply.version, reply.deferred.complete(False))
            else:
                reply.deferred.on_done(decoded)
        else:
            decoded(reply.version, reply.body)

    @staticmethod
    def _errors(resp: Any, tps: list[TopicPartition]) -> dict[TopicPartition, Err]:
        if resp is None:
            return dict.fromkeys(tps, produce_error(Err.NETWORK_EXCEPTION))
        top = _err(getattr(resp, "error_code", 0) or 0)
        if top == Err.UNSUPPORTED_VERSION:
            return dict.fromkeys(tps, Err.NONE)
        if top != Err.NONE:
            return dict.fromkeys(tps, produce_error(top))
        out = dict.fromkeys(tps, Err.NONE)
        for txn in resp.results_by_transaction or []:
            for t in txn.topic_results:
                for r in t.results_by_partition:
                    tp = TopicPartition(t.name, r.partition_index)
                    if tp in out and r.partition_error_code:
                        out[tp] = produce_error(_err(r.partition_error_code))
        return out


class _Unsupported:
    """What a coordinator without verification answers (UNSUPPORTED_VERSION)."""

    error_code = int(Err.UNSUPPORTED_VERSION)
    results_by_transaction: list[Any] = []
