"""DeleteRecords across three broker processes: followers take the leader's log start from their fetch
responses, so a follower elected leader starts where the leader did."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_cluster
from logbroker.dump import dump_partition
from test_repl_failover import create, partition_meta, produce, wait_for
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper


def test_followers_learn_the_log_start_and_keep_it_as_leader(tmp_path: Path, zookeeper: LocalZooKeeper) -> None:
    from test_broker_delete_records import delete

    cluster = make_cluster(tmp_path, zookeeper)
    by_id = {i + 1: b for i, b in enumerate(cluster)}
    try:
        create(cluster, "dr")
        acked, errors = produce(cluster, "dr", range(5))
        assert sorted(acked) == list(range(5)) and errors == []
        leader, isr = partition_meta(cluster, "dr")
        assert delete(by_id[leader].bootstrap, "dr", 3) == (3, None)
        for f in [by_id[i] for i in isr if i != leader]:
            wait_for(lambda f=f: dump_partition(f.data / "dr-0")[0]["log_start_offset"] == 3,
                     what="a follower to learn the log start")
        by_id[leader].kill()
        new = wait_for(lambda: (m := partition_meta(cluster, "dr"))[0] not in (-1, leader) and m[0],
                       what="a new leader")
        assert delete(by_id[new].bootstrap, "dr", 0) == (3, None), "the new leader starts at 3 too"
    finally:
        for b in cluster:
            b.kill()
