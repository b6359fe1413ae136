"""`make bench-broker`: one standalone broker on loopback, confluent-kafka, 100-byte values.

Measures produce throughput (messages/s, MB/s) and per-message latency p50/p99 (enqueue → delivery
report) with acks=1, with and without fsync per append, then consume throughput; and a consumer
group (`group`, medians of 5 rounds): the time from `subscribe()` to an assignment (join), from a second member's
`subscribe()` until both hold partitions (rebalance on join), from a member's `close()` until the
other holds every partition (rebalance on leave), and the rate of one member that reads 4 partitions
and commits synchronously after every batch of up to 500, or of 10 (msgs/s, commits/s, latency).
Writes JSON to --out and prints a table. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from brokerlib import BrokerProc  # noqa: E402

quiet = logging.getLogger("bench-quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
VALUE = b"x" * 100


def produce(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 500000, "logger": quiet})
    lat: list[float] = []
    t0 = time.perf_counter()
    for _ in range(n):
        sent = time.perf_counter()
        while True:
            try:
                p.produce(topic, VALUE, partition=0,
                          on_delivery=lambda e, m, s=sent: lat.append(time.perf_counter() - s))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    dt = time.perf_counter() - t0
    lat.sort()
    return {"messages": n, "seconds": dt, "msgs_per_s": n / dt, "mb_per_s": n * len(VALUE) / dt / 1e6,
            "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3,
            "mean_ms": statistics.fmean(lat) * 1e3}


def produce_spread(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "logger": quiet,
                  "queue.buffering.max.messages": 500000})
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % GROUP_PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)


def consume(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 * 1024 * 1024, "logger": quiet})
    c.assign([TopicPartition(topic, 0, 0)])
    got, t0 = 0, time.perf_counter()
    while got < n and time.perf_counter() - t0 < 120:
        got += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    return {"messages": got, "seconds": dt, "msgs_per_s": got / dt, "mb_per_s": got * len(VALUE) / dt / 1e6}


GROUP_PARTITIONS = 4


def _member(bootstrap: str, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     "partition.assignment.strategy": "range", "logger": quiet})


def _wait(pred: Callable[[], bool], members: list[Any], timeout: float = 60) -> float:
    """Seconds until `pred()` holds, polling every member meanwhile."""
    t0 = time.perf_counter()
    while not pred():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("the group did not settle")
        for m in members:
            m.poll(0.01)
    return time.perf_counter() - t0


def group(bootstrap: str, topic: str, rounds: int = 5) -> dict[str, float]:
    """Join and rebalance times, medians of `rounds` (each a new group, two members)."""
    joins, on_join, on_leave = [], [], []
    for r in range(rounds):
        a, b = _member(bootstrap, f"bench-join-{r}"), _member(bootstrap, f"bench-join-{r}")
        a.subscribe([topic])
        joins.append(_wait(lambda a=a: bool(a.assignment()), [a]))
        b.subscribe([topic])
        on_join.append(_wait(lambda a=a, b=b: bool(a.assignment()) and bool(b.assignment()) and
                             len(a.assignment()) + len(b.assignment()) == GROUP_PARTITIONS, [a, b]))
        t0 = time.perf_counter()
        b.close()
        _wait(lambda a=a: len(a.assignment()) == GROUP_PARTITIONS, [a])
        on_leave.append(time.perf_counter() - t0)  # close() included: it sends LeaveGroup
        a.close()
    return {"partitions": GROUP_PARTITIONS, "rounds": rounds, "join_ms": statistics.median(joins) * 1e3,
            "rebalance_on_join_ms": statistics.median(on_join) * 1e3,
            "rebalance_on_leave_ms": statistics.median(on_leave) * 1e3}


def consume_committing(bootstrap: str, topic: str, n: int, batch: int) -> dict[str, float]:
    """One member reads `n` records of `topic`, committing synchronously after every `batch` of them."""
    from confluent_kafka import TopicPartition

    c = _member(bootstrap, f"bench-consume-{batch}")
    c.subscribe([topic])
    got = commits = 0
    lat: list[float] = []
    t0 = deadline = time.perf_counter() + 120
    while got < n and time.perf_counter() < deadline:
        msgs = [m for m in c.consume(batch, 1.0) if m.error() is None]
        if not msgs:
            continue
        t0 = min(t0, time.perf_counter())  # the clock starts at the first batch: the join is measured apart
        got += len(msgs)
        last: dict[int, int] = {}
        for m in msgs:
            last[m.partition()] = m.offset() + 1
        t1 = time.perf_counter()
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in last.items()], asynchronous=False)
        lat.append(time.perf_counter() - t1)
        commits += 1
    dt = time.perf_counter() - t0
    c.close()
    lat.sort()
    return {"messages": got, "seconds": dt, "msgs_per_s": got / dt, "commits_per_s": commits / dt,
            "msgs_per_commit": got / max(commits, 1), "commit_p50_ms": lat[len(lat) // 2] * 1e3,
            "commit_p99_ms": lat[int(len(lat) * 0.99)] * 1e3}


def produce_consume(messages: int, env: dict[str, str]) -> dict[str, float]:
    """One fresh broker (started with `env` added), one topic: produce `messages`, then read them."""
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory() as d:
        b = BrokerProc(Path(d) / "data", env=env).start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})
            for f in admin.create_topics([NewTopic("bench", 1, 1)]).values():
                f.result(15)
            out = {f"produce_{k}": v for k, v in produce(b.bootstrap, "bench", messages).items()}
            out.update({f"consume_{k}": v for k, v in consume(b.bootstrap, "bench", messages).items()})
            return out
        finally:
            b.kill()


def probes_cost(messages: int, rounds: int) -> dict[str, Any]:
    """What the coverage probes cost: the produce and consume measures of a broker with its probes
    on and with them off (`LOGBROKER_PROBES=off`), in alternating rounds and orders so that a
    machine's drift falls on both; medians, and on/off ratios (1.0: no cost; the spread of the rounds is the noise)."""
    runs: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    for i in range(rounds):
        for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):  # neither always goes first
            runs[mode].append(produce_consume(messages, {"LOGBROKER_PROBES": mode}))
    keys = ("produce_msgs_per_s", "produce_p99_ms", "consume_msgs_per_s")
    out: dict[str, Any] = {"messages": messages, "rounds": rounds}
    for mode, rs in runs.items():
        out[mode] = {k: round(statistics.median(r[k] for r in rs), 2) for k in keys}
        out[mode]["spread"] = {k: [round(min(r[k] for r in rs), 2), round(max(r[k] for r in rs), 2)] for k in keys}
    out["on_over_off"] = {k: round(out["on"][k] / out["off"][k], 3) for k in keys}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/broker.json"))
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--probes-cost", type=int, default=0, metavar="ROUNDS",
                    help="only measure what the coverage probes cost: ROUNDS of probes on / off")
    args = ap.parse_args()
    if args.probes_cost:
        res = probes_cost(args.messages, args.probes_cost)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2))
        print(json.dumps(res, indent=2))
        print(f"written to {args.out}")
        return 0
    from confluent_kafka.admin import AdminClient, NewTopic

    results: dict[str, object] = {"value_bytes": len(VALUE), "acks": 1}
    for name, overrides, n in (("no-fsync", [], args.messages), ("fsync-per-append", ["flush.messages=1"],
                                                                   max(args.messages // 4, 1000))):
        with tempfile.TemporaryDirectory() as d:
            b = BrokerProc(Path(d) / "data", overrides=overrides).start()
            try:
                admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})
                for f in admin.create_topics([NewTopic("bench", 1, 1)]).values():
                    f.result(15)
                results[f"produce/{name}"] = produce(b.bootstrap, "bench", n)
                if name == "no-fsync":
                    results["consume"] = consume(b.bootstrap, "bench", n)
            finally:
                b.kill()
    with tempfile.TemporaryDirectory() as d:  # a fresh broker: the group coordinator's topic from empty
        b = BrokerProc(Path(d) / "data", overrides=["group.initial.rebalance.delay.ms=0"]).start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})
            for f in admin.create_topics([NewTopic("bench-group", GROUP_PARTITIONS, 1)]).values():
                f.result(15)
            produce_spread(b.bootstrap, "bench-group", args.messages // 2)
            results["group"] = {**group(b.bootstrap, "bench-group"), "initial_rebalance_delay_ms": 0}
            n = args.messages // 2
            results["group/commit-every-500"] = consume_committing(b.bootstrap, "bench-group", n, 500)
            results["group/commit-every-10"] = consume_committing(b.bootstrap, "bench-group", n // 10, 10)
        finally:
            b.kill()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    for k, v in results.items():
        if isinstance(v, dict):
            print(f"{k:26s} " + "  ".join(f"{kk}={vv:.1f}" if isinstance(vv, float) else f"{kk}={vv}"
                                           for kk, vv in v.items()))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
