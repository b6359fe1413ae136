"""`ZkStore.claim_producer_id_block` on a real ZooKeeper: brokers claiming at once from their own
sessions and threads (the worker threads a broker's store calls run on) never get overlapping blocks,
and the znode is Kafka's."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from logbroker.coord import paths
from logbroker.coord.model import ProducerIdBlock
from logbroker.coord.zk import ZkStore
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper


def test_concurrent_claims_from_three_sessions_are_disjoint(zookeeper: LocalZooKeeper) -> None:
    stores = [ZkStore(zookeeper.connect, 10000) for _ in range(3)]
    try:
        for s in stores:
            s.start()
        with ThreadPoolExecutor(max_workers=12) as pool:
            futures = [pool.submit(stores[i % 3].claim_producer_id_block, i % 3 + 1) for i in range(60)]
            blocks = [f.result(timeout=60) for f in futures]
        ids = sorted((b.first, b.last) for b in blocks)
        assert ids == [(1000 * i, 1000 * i + 999) for i in range(60)]  # no overlap, no gap
        raw, stat = stores[0].zk.get(paths.LATEST_PRODUCER_ID_BLOCK)
        d = json.loads(raw)
        assert set(d) == {"version", "broker", "block_start", "block_end"} and d["block_end"] == "59999"
        assert ProducerIdBlock.from_json(raw).last == 59999 and stat.version == 59  # one create, 59 sets
    finally:
        for s in stores:
            s.stop()
