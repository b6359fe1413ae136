"""Issue 27's group-coordinator failover, acted out on the simulator: three brokers, a six-partition
topic, a group of five members committing after every 20 records they read, the group coordinator's
broker killed once 1,000 of 3,000 records were read and started again 10 s later. Every record is
read, every partition's committed offset reaches its log end, and no partition's acknowledged
commits go backwards. (On real processes, with five members of three client libraries, the loop is
`tests/replication/group_failover.py` and its test `test_repl_group_failover.py`; what it found —
kafka-python's KIP-320 validation refused by the broker — the simulated client does not do, so here
the coordinator's own failover is what is shown: the offsets partition moving to a new leader and
being loaded there while members rejoin and commit.)"""

from __future__ import annotations

import asyncio

import pytest
from logsim.client import SimKafkaClient
from logsim.cluster import SimCluster
from logsim.group import SimGroupConsumer

PARTS, RECORDS, MEMBERS, EVERY = 6, 3000, 5, 20


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_five_members_read_everything_after_the_group_coordinator_dies(seed: int) -> None:
    with SimCluster(seed, 3, settings={"offsets.topic.replication.factor": "3"}) as c:
        c.start()
        c.run_for(5)
        c.create_topic("t", PARTS, 3)
        c.run_for(3)
        producer = SimKafkaClient(c.net, c.names, "n2", "t", c.rng("producer"))
        sent = c.loop.run_until_complete(producer.send_many([(v % PARTS, v) for v in range(RECORDS)]))
        assert all(r[0] == "ok" for r in sent)
        ends = {k: RECORDS // PARTS for k in range(PARTS)}
        members = [SimGroupConsumer(SimKafkaClient(c.net, c.names, c.names[i % 3], "t", c.rng(f"m{i}")), "g", PARTS)
                   for i in range(MEMBERS)]
        read: set[tuple[int, int]] = set()
        commits: dict[int, list[int]] = {k: [] for k in range(PARTS)}  # acknowledged, in order
        stop = False

        async def member(m: SimGroupConsumer) -> None:
            unread_commit = 0
            while not stop:
                await m.rejoin_if_asked()
                got = await m.k.poll(0.2)
                for k, pairs in got.items():
                    read.update((int(k), o) for o, _ in pairs)
                    unread_commit += len(pairs)
                if unread_commit >= EVERY or (not got and m.assigned):
                    acked, _ = await m.commit({k: m.k.positions[k] for k in m.assigned if k in m.k.positions})
                    for k, o in sorted(acked.items()):
                        commits[k].append(o)
                    unread_commit = 0 if acked else unread_commit

        tasks = [c.loop.create_task(member(m)) for m in members]
        while len(read) < 1000:
            c.run_for(0.05)
            assert c.loop.time() < 300, f"only {len(read)} records read before the kill"
        victim = c.loop.run_until_complete(members[0]._find())
        c.nodes[victim].kill()
        at_kill = sum(map(len, commits.values()))
        c.run_for(10)
        moved = {m.coordinator for m in members} - {None, victim}
        committed_while_down = sum(map(len, commits.values())) - at_kill
        c.nodes[victim].start()
        deadline = c.loop.time() + 120
        done = False
        while not done and c.loop.time() < deadline:
            c.run_for(0.5)
            done = len(read) == RECORDS and all(commits[k] and commits[k][-1] == ends[k] for k in range(PARTS))
        stop = True
        c.run_for(1)
        for t in tasks:
            t.cancel()
        c.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        assert moved and committed_while_down > 0, "the members never committed to a new coordinator while it was down"
        assert len(read) == RECORDS, f"{RECORDS - len(read)} records never read"
        assert {k: v[-1] for k, v in commits.items() if v} == ends, "a committed offset never reached the log end"
        for k, v in commits.items():  # no acknowledged commit below the one acknowledged before it
            assert all(b >= a for a, b in zip(v, v[1:], strict=False)), (k, v)
