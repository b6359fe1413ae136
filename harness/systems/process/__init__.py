"""A process system: any Kafka-protocol broker, described by a TOML file (`config.py` its schema,
`system.py` the part, `db.py` its deployment). `docs/systems/logbroker.toml` describes our own
broker this way."""
