"""Node mechanics that any system under test composes into its deployment (`kernel.db.DB`).

Modelled on Jepsen's `jepsen.db`, where `DB` has only setup/teardown and killing, pausing and log
files are separate optional capabilities (`kernel/db.py`, `kernel/capabilities.py`). What lives here
is what every system needs and none owns: `pidfile` (start, kill, pause by pid file), `lazyfs` (the
FUSE disk that forgets what was not fsynced), `faketime` (the skewable clock), `iptables` (cuts),
`node_locks`, `every_node`; and what any Kafka-protocol broker is asked over the wire (`wire`):
`api_versions`, `metadata_views`/`kafka_view` (leaders, epochs, ISRs), `offsets` and `kafka_reads`
(the ends of each partition), `transactions` (open transactions), `kafka_admin` (topics).

May import: `kernel`, the standard library and client libraries; never a system (the systems in
`harness/systems/` import this package, not the other way round).
"""
