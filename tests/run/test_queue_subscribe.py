"""The queue client in subscribe mode against a real (standalone) broker: two workers share the run's
group, the rebalances and the acknowledged commits they record are what the coordinator holds, and
a worker that rejoins hands its keys over at the offsets it committed."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cluster-impl" / "tests"))
from brokerlib import BrokerProc  # noqa: E402

from kernel.history import OpType  # noqa: E402
from kernel.node import Node  # noqa: E402
from kernel.spec import build_spec  # noqa: E402
from kernel.workload import ClientContext, Completion, Invocation  # noqa: E402
from tests.conftest import until  # noqa: E402
from workloads import librdkafka  # noqa: E402
from workloads.queue import QueueClient, group_id  # noqa: E402

KEYS = [0, 1, 2, 3]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProc]:
    b = BrokerProc(tmp_path / "data", overrides=["group.initial.rebalance.delay.ms=0",
                                                 "offsets.topic.num.partitions=5"]).start()
    yield b
    b.kill()


def _client(broker: BrokerProc, process: int) -> QueueClient:
    spec = build_spec({"topic": "chaos", "sub_via": "subscribe", "seed": 7, "partitions": 4})
    c = QueueClient(ClientContext(spec, process, lambda n: broker.bootstrap, [broker.bootstrap], librdkafka.connect))
    c.open(Node("n1", "127.0.0.1", "127.0.0.1"))
    return c


def send(c: QueueClient, key: int, value: int) -> str:
    assert c.k is not None
    return asyncio.run(c.k.send_many([(key, value)]))[0][0]


class Member:
    """A client and what its ops recorded: the keys it holds by its rebalance logs, its reads, commits."""

    def __init__(self, client: QueueClient) -> None:
        self.c = client
        self.holds: set[int] = set()
        self.reads: dict[int, list[int]] = {}
        self.commits: dict[int, int] = {}
        self.logs: list[dict[str, list[int]]] = []

    def play(self, inv: Invocation) -> Completion:
        done = asyncio.run(self.c.invoke(inv))
        assert done.type is OpType.OK, done
        for entry in done.extra.get("rebalance-log", []):
            self.logs.append(entry)
            self.holds = (self.holds - set(entry["revoked"])) | set(entry["assigned"])
        for m in done.value if inv.f == "poll" else []:
            for k, pairs in m[1].items():
                self.reads.setdefault(int(k), []).extend(o for o, _ in pairs)
        assert "commit-error" not in done.extra, done.extra
        self.commits.update({int(k): v for k, v in done.extra.get("commits", {}).items()})
        return done

    def poll(self) -> Completion:
        return self.play(Invocation("poll", [["poll"]]))



def test_two_subscribers_share_the_group_record_rebalances_and_commit(broker: BrokerProc) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("chaos", 4, 1)])
    admin.close()
    a, b = Member(_client(broker, 0)), Member(_client(broker, 1))
    try:
        for i in range(400):
            assert send(a.c, i % 4, 1000 + i) == "ok"
        done = a.play(Invocation("subscribe", KEYS))
        assert done.value == KEYS and "rebalance-log" not in done.extra
        until("a to hold every key and read 100 of each",
              lambda: a.holds == set(KEYS) and all(len(a.reads.get(k, [])) >= 100 for k in KEYS), a.poll)
        assert a.logs[0] == {"revoked": [], "assigned": KEYS}
        assert all(a.reads[k] == list(range(100)) for k in KEYS)  # from the start, in order, once
        assert a.commits == dict.fromkeys(KEYS, 100)
        # each poll first asks the coordinator for its keys' committed offsets: what a committed
        assert a.poll().extra["fetched-commits"] == {str(k): 100 for k in KEYS}
        for i in range(400, 800):
            assert send(a.c, i % 4, 1000 + i) == "ok"
        b.play(Invocation("subscribe", KEYS))

        def both() -> None:
            a.poll()
            b.poll()

        until("the keys to be split", lambda: a.holds and b.holds and a.holds | b.holds == set(KEYS), both)
        assert not a.holds & b.holds
        assert {"revoked": KEYS, "assigned": sorted(a.holds)} in a.logs  # the eager protocol: all, then some
        until("every record read", lambda: all(max(a.reads.get(k, [-1]) + b.reads.get(k, [-1])) == 199
                                               for k in KEYS), both)
        # b goes on from where a committed its keys (a read on until the rebalance reached it)
        assert all(b.reads[k][0] == a.commits[k] for k in b.holds if a.commits[k] < 200)
        assert all(a.reads[k] + b.reads.get(k, []) == list(range(200)) for k in b.holds)
        # the commits the ops recorded are what the coordinator holds
        check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id(a.c.ctx.spec)})
        got = {tp.partition: tp.offset for tp in check.committed([TopicPartition("chaos", k) for k in KEYS], 10)}
        check.close()
        assert got == dict.fromkeys(KEYS, 200)
        # a leaves and joins again: its leaving op records the revocation of what it held, and its
        # new consumer goes on from the offsets the group committed
        held = sorted(a.holds)
        done = a.play(Invocation("subscribe", KEYS, {"rejoin": True}))
        assert done.extra["rebalance-log"] == [{"revoked": held, "assigned": []}]
        a.reads.clear()
        for i in range(800, 1200):
            assert send(b.c, i % 4, 1000 + i) == "ok"
        until("a back in the group with keys", lambda: bool(a.holds) and a.holds | b.holds == set(KEYS), both)
        until("a to read its keys", lambda: all(a.reads.get(k) for k in a.holds), both)
        assert all(a.reads[k][0] >= 200 for k in a.holds)
    finally:
        a.c.close()
        b.c.close()
