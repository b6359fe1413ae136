"""The controller (seed 003): one broker, elected through ZooKeeper, that decides leaders and ISRs.

`decisions` holds the pure rules (placement, leader election); `controller` drives them against
ZooKeeper and sends LeaderAndIsr/UpdateMetadata to brokers.
"""
