"""What each broker tells a client about a topic's leaders, asked over the Kafka protocol.

A client finds a partition's leader in whichever broker's Metadata answer it got last; the
controller's word in ZooKeeper is not what clients read. When a drain gives up because the
partition's "leader" keeps answering NOT_LEADER, the question an operator asks is which broker sent
the client there — so the harness asks every broker and writes the answers down beside the run
(`test.json` `drain.views`) and in its log.
"""

from __future__ import annotations

import socket
import struct

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from harness.db.offsets import exact
from kernel.db import LeaderView

VERSION = 7  # the first with each partition's leader epoch, and not yet flexible


def leader_views(address: str, topic: str, timeout_s: float = 3.0) -> dict[int, LeaderView] | str:
    """Partition -> the leader the broker at `address` names; a one-line reason if it did not answer."""
    host, port = address.rsplit(":", 1)
    req = MetadataRequest(version=VERSION, topics=[MetadataRequest.MetadataRequestTopic(version=VERSION, name=topic)],
                          allow_auto_topic_creation=False)
    req.with_header(correlation_id=1, client_id="chaos-diagnosis")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.sendall(bytes(req.encode(header=True, framed=True)))
            size = struct.unpack(">i", exact(sock, 4))[0]
            resp = MetadataResponse.decode(exact(sock, size), version=VERSION, header=True)
    except (OSError, ValueError, struct.error) as e:
        return f"no answer ({type(e).__name__}: {e})"
    return {int(p.partition_index): LeaderView(int(p.leader_id), int(p.leader_epoch), int(p.error_code))
            for t in resp.topics if t.name == topic for p in t.partitions}
