"""Tansu 0.6.0 (crates.io `tansu`), a Kafka-protocol broker in Rust, under the harness: a
process-system file (`sqlite.toml`) plus its cargo build into the node image (`build.py`)."""
