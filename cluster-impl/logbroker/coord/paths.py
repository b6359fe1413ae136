"""The ZooKeeper layout of seed 003 (Kafka detailed replication design v3)."""

from __future__ import annotations

CONTROLLER = "/controller"  # ephemeral: {"brokerid": id}
CONTROLLER_EPOCH = "/controller_epoch"  # integer, incremented by each new controller
BROKER_IDS = "/brokers/ids"  # ephemeral children: {"host", "port"}; czxid = broker epoch
TOPICS = "/brokers/topics"  # /brokers/topics/<t>: {"partitions": {"0": [1,2,3], ...}}
ISR_CHANGE = "/isr_change_notification"


def broker(bid: int) -> str:
    return f"{BROKER_IDS}/{bid}"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def partition_state(name: str, p: int) -> str:
    """{"leader", "leader_epoch", "isr", "controller_epoch"}, always written conditionally on version."""
    return f"{TOPICS}/{name}/partitions/{p}/state"
