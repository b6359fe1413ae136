"""The ZooKeeper layout of seed 003 (Kafka detailed replication design v3)."""

from __future__ import annotations

CONTROLLER = "/controller"  # ephemeral: {"brokerid": id}
CONTROLLER_EPOCH = "/controller_epoch"  # integer, incremented by each new controller
BROKER_IDS = "/brokers/ids"  # ephemeral children: {"host", "port"}; czxid = broker epoch
# /brokers/topics/<t>: {"partitions": {"0": [1,2,3], ...}, "adding_replicas": {...}, "removing_replicas": {...}}
TOPICS = "/brokers/topics"
ISR_CHANGE = "/isr_change_notification"
CONFIG_TOPICS = "/config/topics"  # /<t>: {"version": 1, "config": {key: value}}, Kafka's layout
# the last producer-id block any broker claimed, Kafka's layout (`coord.model.ProducerIdBlock`):
# {"version": 1, "broker": id, "block_start": "first", "block_end": "last"}, always written conditionally
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Admin requests (seed 003 paths 5 and 6): created by an operator, removed by the controller once done.
REASSIGN = "/admin/partitions_reassigned"  # /<topic>/<partition>: {"replicas": [..]}
PARTITIONS_ADD = "/admin/partitions_add"  # /<topic>/<partition>: {"replicas": [..]}
# Not in the seed (it only names the preferred replica); Kafka's later path for the same request.
PREFERRED_ELECTION = "/admin/preferred_replica_election"  # {"partitions": [{"topic", "partition"}, ...]}


# KIP-966's unclean-restart knowledge, in ZooKeeper's terms: a broker whose process found its log
# directory without its meta file registers with "lost_data": <that process's incarnation>; the
# controller that has taken it out of every ISR records the incarnation here, so no later controller,
# and no later session of the same process, does it again.
LOST_DATA_HANDLED = "/brokers/lost_data_handled"  # /<id>: the incarnation handled


def lost_data_handled(bid: int) -> str:
    return f"{LOST_DATA_HANDLED}/{bid}"


def broker(bid: int) -> str:
    return f"{BROKER_IDS}/{bid}"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def partition_state(name: str, p: int) -> str:
    """{"leader", "leader_epoch", "isr", "controller_epoch"}, always written conditionally on version."""
    return f"{TOPICS}/{name}/partitions/{p}/state"


def admin_entry(root: str, name: str, p: int) -> str:
    return f"{root}/{name}/{p}"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"
