"""The DB: deploying and driving the system under test (ZooKeeper + logbroker) on nodes.

Modelled on Jepsen's `jepsen.db`: `DB` has only setup/teardown; killing, pausing and log files are
separate optional capabilities. `protocol` holds the Protocols; `logbroker` is our implementation
(ZooKeeper ensemble + one broker per node, through `Remote` only).
"""
