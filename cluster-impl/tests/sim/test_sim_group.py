"""The simulated group consumer (`logsim.group`) against the production group coordinator: the range
assignor, a group shared and handed over, commits the coordinator keeps."""

from __future__ import annotations

import asyncio

from logsim.client import SimKafkaClient
from logsim.cluster import SimCluster
from logsim.group import SimGroupConsumer, range_assign


def test_the_range_assignor_hands_out_contiguous_ranges_by_sorted_member() -> None:
    assert range_assign(["b", "a"], 5) == {"a": [0, 1, 2], "b": [3, 4]}
    assert range_assign(["a", "b", "c"], 2) == {"a": [0], "b": [1], "c": []}
    assert range_assign(["solo"], 3) == {"solo": [0, 1, 2]}


def test_two_members_share_the_keys_then_one_leaves_and_the_other_takes_all() -> None:
    with SimCluster(4, 3, settings={"offsets.topic.replication.factor": "3"}) as c:
        c.start()
        c.run_for(5)
        c.create_topic("t", 4, 3)
        c.run_for(3)
        producer = SimKafkaClient(c.net, c.names, "n2", "t", c.rng("producer"))
        sent = c.loop.run_until_complete(producer.send_many([(k, 100 * k + i) for k in range(4) for i in range(10)]))
        assert all(r[0] == "ok" for r in sent)

        def member(name: str) -> SimGroupConsumer:
            return SimGroupConsumer(SimKafkaClient(c.net, c.names, "n1", "t", c.rng(name)), "g", 4)

        a, b = member("a"), member("b")

        read: dict[int, list[int]] = {}

        async def polls(m: SimGroupConsumer, rounds: int) -> None:  # as a worker does, beside the others
            for _ in range(rounds):
                await m.rejoin_if_asked()
                for k, pairs in (await m.k.poll(0.2)).items():
                    read.setdefault(int(k), []).extend(o for o, _ in pairs)

        async def both(rounds: int) -> None:
            await asyncio.gather(polls(a, rounds), polls(b, rounds))

        c.loop.run_until_complete(both(60))
        assert sorted(a.assigned + b.assigned) == [0, 1, 2, 3] and a.assigned and b.assigned
        acked, err = c.loop.run_until_complete(a.commit({k: 7 for k in a.assigned}))
        assert err is None and acked == {k: 7 for k in a.assigned}
        assert c.loop.run_until_complete(b.committed(a.assigned)) == {k: 7 for k in a.assigned}
        held = list(a.assigned)
        assert c.loop.run_until_complete(a.leave()) == [{"revoked": held, "assigned": []}]

        read.clear()
        c.loop.run_until_complete(polls(b, 60))
        assert b.assigned == [0, 1, 2, 3]
        assert {r["assigned"] and tuple(r["assigned"]) for r in b.rebalances} >= {(0, 1, 2, 3)}
        assert all(read[k] == [7, 8, 9] for k in held)  # it goes on from what a committed
        c.loop.run_until_complete(b.leave())
