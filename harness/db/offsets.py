"""A partition's ends as its leader sees them, asked over the Kafka protocol from the control host.

A Kafka client can learn a partition's high watermark (ListOffsets, latest) but not its log end; a
replica can (ListOffsets with its own replica id, as followers of older Kafka asked). The recovery
predicate needs both: a leader whose HW is behind its log end has acknowledged records a drain that
stopped at that HW would miss (`kernel.db.recovered`).
"""

from __future__ import annotations

import socket
from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from harness.db.wire import WireError, ask, connected
from kernel.db import LeaderEnd, StableEnd

LATEST = -1
READ_COMMITTED = 1


def _ask(sock: socket.socket, corr: int, replica_id: int, topic: str, keys: list[int], isolation_level: int = 0
         ) -> dict[int, Any]:
    t = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=4, replica_id=replica_id, isolation_level=isolation_level, topics=[
        t(version=4, name=topic, partitions=[t.ListOffsetsPartition(version=4, partition_index=k, timestamp=LATEST)
                                             for k in keys])])
    resp = ask(sock, req, ListOffsetsResponse, 4, corr)
    return {int(p.partition_index): p for tp in resp.topics for p in tp.partitions if p.error_code == 0}


def leader_ends(address: str, broker_id: int, topic: str, keys: list[int], timeout_s: float = 3.0
                ) -> dict[int, LeaderEnd]:
    """The ends of those of `keys` the broker at `address` leads; {} when it does not answer."""
    try:
        with connected(address, timeout_s) as sock:
            hws = _ask(sock, 1, -1, topic, keys)
            leos = _ask(sock, 2, broker_id, topic, keys)
    except WireError:
        return {}
    return {k: LeaderEnd(int(hws[k].offset), int(leos[k].offset), int(hws[k].leader_epoch))
            for k in keys if k in hws and k in leos}


def stable_ends(address: str, topic: str, keys: list[int], timeout_s: float = 3.0) -> dict[int, StableEnd]:
    """LSO (ListOffsets read_committed) and HW of those of `keys` the broker at `address` leads."""
    try:
        with connected(address, timeout_s) as sock:
            lsos = _ask(sock, 1, -1, topic, keys, READ_COMMITTED)
            hws = _ask(sock, 2, -1, topic, keys)
    except WireError:
        return {}
    return {k: StableEnd(int(lsos[k].offset), int(hws[k].offset)) for k in keys if k in lsos and k in hws}
