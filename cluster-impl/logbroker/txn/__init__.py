"""Transactions, the coordinator's side (KIP-98, with KIP-890's defences; issue 27).

A transactional id's coordinator is the leader of partition `java_hash(id) % n` of the internal topic
`__transaction_state`; each state change of its transaction is a record appended there and
acknowledged once the partition's HW covers it, so a broker that becomes the partition's leader
loads the partition and finishes every transaction it finds decided.

- `state.py`: one transactional id's state machine (Empty → Ongoing → PrepareCommit/PrepareAbort →
  CompleteCommit/CompleteAbort), epochs and fencing (pure; time passed in).
- `records.py`: where an id lives, its records' encoding.
- `markers.py`: WriteTxnMarkers to every partition leader of a decided transaction until each answers.
- `coordinator.py`: the requests (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
  DescribeTransactions, ListTransactions, FindCoordinator key type 1), loading and unloading, writes,
  timeouts.
- `host.py`: what it uses of the broker core, as Protocols.

May import `logbroker.core`, `logbroker.group.records` (the partition rule), `logbroker.protocol` and
kafka-python's codec; nothing imports it but `core/broker.py`. The partition side (transactional
batches, markers, read_committed, KIP-890 verification on the leader) is in `logbroker/core/`.
"""
