"""The harness: the `chaos` CLI, run orchestration, provisioners, node control and the history.

Data flows one way: config -> schedule -> run -> history -> checks -> report. The harness talks to
nodes only through `Remote` (SSH) and to the cluster under test only through a Kafka client in
`workloads/`; it never imports `cluster-impl` (the node image installs that).

What lives here, one concept per module:
- `node`: the `Node` record a provisioner hands out.
- `remote`: the `Remote` protocol (run a command, put/get a file) and its result type.
- `errors`: the error tree and the exit code each error maps to.
- `history`: the op model of DESIGN.md and the append-and-flush history writer/reader.
- `cli`: the click entry point; sub-commands live next to what they drive.
"""
