"""The orchestrator: the `chaos` CLI and everything that runs a test, plus the parts that reach nodes.

Layers (docs/design.md, "Layers and imports"; docs/layers.svg draws them from the imports): `kernel`
is the ground floor; `workloads`, `nemesis` and `results` are parts that import only `kernel`; this
package sits on top and imports them all, never the other way round. Inside it, the orchestrator
reaches a concrete workload, fault family, checker or system only through `registry` (or the `Test`
record it builds), and only `provision/sim.py` imports the simulator (`logsim`).

The orchestrator proper, which never names a concrete workload, DB adapter or checker:
- `cli` (entry point, sub-commands imported on first use) and one `*_cli` module per sub-command
- `registry`: RunSpec -> `kernel.test.Test` (the one place concrete parts are chosen)
- `run`: `run(test)` nests the phases of `phases`; `pool`: plays ops through clients; `signals`:
  SIGTERM/SIGHUP as Ctrl-C, and cleanup that cannot be cut short; `progress`: the live line
Parts that live here because they reach nodes:
- `provision/` (docker containers, ssh hosts), `ssh` (the paramiko `Remote`), `image/` (the node
  image), `db/` (node mechanics any system composes: pid files, the FUSE disk, libfaketime,
  iptables, and what any Kafka-protocol broker is asked: Metadata, ListOffsets, ApiVersions)
- `systems/`: the systems under test, one folder each (`logbroker`, ours with ZooKeeper; `process`,
  any broker a TOML file describes), reached through `harness.systems.get_system`
- `bench/`: `make bench-cluster`, `make bench-run`, `make bench-sim`
"""
