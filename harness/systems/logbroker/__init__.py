"""Our broker (`cluster-impl/`) as a system under test: a ZooKeeper ensemble and one broker per node.

- `decl.py`: what the harness reads as data (processes, roles, ports, capabilities, extras);
- `system.py`: the part itself (`LogbrokerSystem`): settings, bug switches, the deployment;
- `db.py`: the container deployment over SSH (`LogbrokerDB`), `settings.py` its one settings record,
  `layout.py` its paths, `zookeeper.py` and `zk_layout.py` its metadata store.
The simulator's deployment of the same broker is `harness/provision/sim.py`.
"""
