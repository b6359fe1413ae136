"""logsim: the deterministic simulator that runs the production broker code.

(docs/design.md, "The simulator and its seams", says what it replaces and how the harness reaches it.)

One concept per file, each a named model: `loop` (the scheduler: virtual time, seeded tie-breaking,
pauses and deaths of node incarnations), `network` (per-link delays, drops, grudges), `zookeeper`
(sessions, ephemerals, watches, versioned writes, multi-ops), `disk` (what a power loss keeps),
`node` (one broker process), `cluster` (n nodes and the views the harness needs), `client` (a
Kafka client's semantics over the brokers' decoded API).

It imports `logbroker` (the code under test) and the standard library; nothing of the harness.
"""
