"""What each broker tells a client about a topic's leaders, asked over the Kafka protocol.

A client finds a partition's leader in whichever broker's Metadata answer it got last; the
controller's word in ZooKeeper is not what clients read. When a drain gives up because the
partition's "leader" keeps answering NOT_LEADER, the question an operator asks is which broker sent
the client there — so the harness asks every broker and writes the answers down beside the run
(`test.json` `drain.views`) and in its log.
"""

from __future__ import annotations

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from harness.db.wire import WireError, ask, connected
from kernel.db import LeaderView

VERSION = 7  # the first with each partition's leader epoch, and not yet flexible


def leader_views(address: str, topic: str, timeout_s: float = 3.0) -> dict[int, LeaderView] | str:
    """Partition -> the leader the broker at `address` names; a one-line reason if it did not answer."""
    req = MetadataRequest(version=VERSION, topics=[MetadataRequest.MetadataRequestTopic(version=VERSION, name=topic)],
                          allow_auto_topic_creation=False)
    try:
        with connected(address, timeout_s) as sock:
            resp = ask(sock, req, MetadataResponse, VERSION)
    except WireError as e:
        return f"no answer ({type(e).__name__}: {e})"
    return {int(p.partition_index): LeaderView(int(p.leader_id), int(p.leader_epoch), int(p.error_code))
            for t in resp.topics if t.name == topic for p in t.partitions}
