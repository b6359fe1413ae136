"""SIGTERM on a clustered broker: a clean exit that leaves ZooKeeper alone.

Closing the ZooKeeper session fires the broker's own watches (its /controller, the controller's
broker and topic watches) and a LOST state. Before, those made a stopping broker register itself
again and run for controller against a closing session, and its log ended with "Task exception
was never retrieved" tracebacks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_cluster
from kazoo.client import KazooClient
from test_repl_failover import create, wait_for
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper


def test_sigterm_shuts_down_cleanly_without_registering_again(tmp_path: Path, zookeeper: LocalZooKeeper) -> None:
    cluster = make_cluster(tmp_path, zookeeper)
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=10)
    try:
        create(cluster, "shut")
        controller = int(zk.get("/controller")[0].split(b'"brokerid": ')[1].rstrip(b"}"))
        other = next(i for i in (1, 2, 3) if i != controller)
        for bid in (controller, other):
            assert cluster[bid - 1].stop() == 0, f"broker {bid} exit code"
        survivor = ({1, 2, 3} - {controller, other}).pop()
        wait_for(lambda: zk.get_children("/brokers/ids") == [str(survivor)], what="only the survivor registered")
        wait_for(lambda: zk.exists("/controller") and b'"brokerid": %d' % survivor in zk.get("/controller")[0],
                 what="the survivor as controller")
        for bid in (controller, other):
            text = cluster[bid - 1].log_text()
            assert "Task exception was never retrieved" not in text and "Traceback" not in text, text[-3000:]
            assert "re-registering" not in text, text[-3000:]
        assert zk.get_children("/brokers/ids") == [str(survivor)], "a stopped broker registered again"
    finally:
        zk.stop()
        for b in cluster:
            b.kill()
