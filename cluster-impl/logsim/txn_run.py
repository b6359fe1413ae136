"""A transactional run on the simulator: producers, a coordinator kill at its worst moment, a leader
kill, and the read_committed verdict — one seed, one history, byte for byte.

Two `SimTxnProducer`s (one speaking EndTxn v5, KIP-890 part 2, one EndTxn v1 as librdkafka does)
run numbered transactions of four values over a 3-partition topic, every fourth aborted on purpose.
The broker coordinating the first producer's id is killed the moment its current transaction sits
in PrepareCommit with markers still to write (a correct new coordinator must finish it; with
`forget-prepared-txns` it hangs), restarted 5 s later (or, `isolate`, cut off for 10 s); then a
leader of the topic is killed mid-transaction and restarted. When the producers are done and the
transaction timeout has passed, a read_committed reader reads every partition to its last stable
offset.

`run(seed, out)` returns the `TxnRun` and, given `out`, writes `history.jsonl` (each transaction's
outcome as its producer saw it) and `reads.json`, plus the topic's replica dumps per node, which a
replay in another process must reproduce exactly (`tests/sim/test_sim_txn.py`).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from logsim.client import SimKafkaClient
from logsim.cluster import SimCluster
from logsim.txn_client import SimTxnProducer, last_stable_offsets, open_transactions, read_committed

TOPIC, PARTITIONS, PER_TXN = "t", 3, 4
SETTINGS = {"min.insync.replicas": "2", "transaction.state.log.num.partitions": "5",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}


@dataclass
class TxnRun:
    outcomes: list[tuple[str, int, str, list[int]]] = field(default_factory=list)  # (producer, k, outcome, values)
    reads: dict[int, list[int]] = field(default_factory=dict)
    lso: dict[int, int] = field(default_factory=dict)
    hw: dict[int, int] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    open_at_end: dict[str, str] = field(default_factory=dict)  # transactional id -> state, after the timeout

    def problems(self) -> list[str]:
        """Committed transactions read once and whole, aborted ones never, unknown ones all or nothing,
        and no transaction hanging (every LSO at its high watermark)."""
        read = Counter(v for vs in self.reads.values() for v in vs)
        out = [f"value {v} read {n} times" for v, n in sorted(read.items()) if n > 1]
        for producer, k, outcome, values in self.outcomes:
            got = [v for v in values if v in read]
            if outcome == "committed" and len(got) != len(values):
                out.append(f"{producer} txn {k} committed, read {got} of {values}")
            if outcome == "aborted" and got:
                out.append(f"{producer} txn {k} aborted, read {got}")
            if outcome == "unknown" and got and len(got) != len(values):
                out.append(f"{producer} txn {k} unknown, read in part: {got} of {values}")
        if not self.lso or self.lso != self.hw:
            out.append(f"a transaction hangs: LSO {self.lso} != HW {self.hw}")
        out += [f"{tid} still {state} after the transaction timeout" for tid, state in sorted(self.open_at_end.items())]
        return out


def _coordinator_in_prepare(c: SimCluster, tid: str) -> str | None:
    """The node whose coordinator holds `tid` in PrepareCommit with markers still to write."""
    for name, node in c.nodes.items():
        core = node.core if node.running else None
        if core is None:
            continue
        e = core.txn.entries.get(tid)
        if e is not None and e.meta.state.value == "PrepareCommit" and core.txn.markers.pending(tid):
            return name
    return None


def run(seed: int, out: Path | None = None, *, bugs: tuple[str, ...] = (), txns: int = 150,
        isolate: bool = False) -> TxnRun:
    """`isolate`: the coordinator is cut off from the other brokers and ZooKeeper for 10 s instead of
    killed (a zombie that still takes its clients' requests while another broker takes over)."""
    result = TxnRun()
    with SimCluster(seed, 3, settings=SETTINGS, bugs=bugs) as c:
        c.start()
        c.run_for(5)
        c.create_topic(TOPIC, PARTITIONS, 3)
        c.run_for(3)
        producers = [SimTxnProducer(c.net, c.names, TOPIC, c.rng("txn", tid), tid, end_version=v)
                     for tid, v in (("p1", 5), ("p2", 1))]

        async def work(p: SimTxnProducer, base: int) -> None:
            for k in range(txns):
                if p.pid < 0 and not await p.init():
                    result.outcomes.append((p.tid, k, "unknown", []))
                    continue
                values = [base + k * PER_TXN + i for i in range(PER_TXN)]
                outcome = await p.transaction([(v % PARTITIONS, v) for v in values], commit=k % 4 != 3)
                result.outcomes.append((p.tid, k, outcome, values))

        tasks = [c.loop.create_task(work(p, 1000 * (i + 1))) for i, p in enumerate(producers)]
        victim = None
        deadline = c.loop.time() + 60
        while victim is None and c.loop.time() < deadline:  # the worst moment for the coordinator, once
            c.run_for(0.002)  # p1 has a few transactions behind it
            if sum(1 for o in result.outcomes if o[0] == "p1") >= 5:
                victim = _coordinator_in_prepare(c, "p1")
        if victim is not None and isolate:
            result.faults.append(f"{c.loop.time():.3f} isolate {victim}, the coordinator of p1 in PrepareCommit")
            others = [n for n in c.names if n != victim]
            grudge = {victim: others, **{n: [victim] for n in others}}
            c.net.add_grudge(grudge)
            c.cut_zk(grudge)
            c.run_for(10)
            c.net.lift_grudge(grudge)
            c.uncut_zk(grudge)
        elif victim is not None:
            result.faults.append(f"{c.loop.time():.3f} kill {victim}, the coordinator of p1 in PrepareCommit")
            c.nodes[victim].kill()
            c.run_for(5)
            c.nodes[victim].start()
        c.run_for(3)
        leader = c.leader(TOPIC, 0)
        if leader is not None:
            result.faults.append(f"{c.loop.time():.3f} kill {leader}, the leader of {TOPIC}-0")
            c.nodes[leader].kill()
            c.run_for(5)
            c.nodes[leader].start()
        c.loop.run_until_complete(asyncio.wait(tasks, timeout=300))
        c.run_for(20)  # past every transaction timeout and cleanup scan
        reader = SimKafkaClient(c.net, c.names, c.names[0], TOPIC, c.rng("reader"))
        keys = list(range(PARTITIONS))
        result.lso = c.loop.run_until_complete(last_stable_offsets(reader, keys))
        result.hw = c.loop.run_until_complete(last_stable_offsets(reader, keys, committed=False))
        result.open_at_end = c.loop.run_until_complete(open_transactions(reader, c.names))
        if result.lso == result.hw:
            result.reads = c.loop.run_until_complete(read_committed(reader, keys))
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in result.outcomes))
            (out / "reads.json").write_text(json.dumps({"reads": result.reads, "lso": result.lso, "hw": result.hw,
                                                        "faults": result.faults, "open": result.open_at_end},
                                                       sort_keys=True))
            for name in c.names:
                for f, data in c.dump_replicas(name).items():
                    (out / "replicas" / name).mkdir(parents=True, exist_ok=True)
                    (out / "replicas" / name / f).write_bytes(data)
    return result
