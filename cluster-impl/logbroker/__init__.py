"""logbroker: the system under test — a broker/controller speaking (a subset of) the Kafka protocol.

Installable on its own; the node image installs it and runs `python -m logbroker --config FILE`.
The harness never imports it.
"""
