"""Coordination through ZooKeeper (kazoo), behind a small interface the state machines use."""
