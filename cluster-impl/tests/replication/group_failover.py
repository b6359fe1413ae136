"""Issue 27's coordinator failover, acted out on real processes: a local ZooKeeper, three brokers,
a 6-partition topic, five group members of three client libraries (each its own process,
`group_member.py`) committing after every 20 records; the group coordinator's broker is SIGKILLed
once 1,000 of 3,000 records are written and restarted 10 s later (with `--churn`, a member is
replaced at the same moment).

`run(root, zk)` acts it out once and returns what happened (`Outcome`); the test
(`test_repl_group_failover.py`) asserts on it, and `python group_failover.py RUNS` loops it and
prints each run's outcome (how the bug was found).
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokerlib import BrokerProc  # noqa: E402
from conftest import make_cluster  # noqa: E402
from test_repl_failover import wait_for  # noqa: E402
from zklib import LocalZooKeeper  # noqa: E402

quiet = logging.getLogger("quiet-group-failover")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False

TOPIC, PARTITIONS, RECORDS, KILL_AT = "events", 6, 3000, 1000
GROUP = "g-five"  # its coordinator is broker 1, the leader of `events` partition 1 (kafka-python's)
KINDS = ("confluent", "confluent", "confluent", "kafka-python", "aiokafka")
MEMBER = Path(__file__).resolve().parent / "group_member.py"


@dataclass
class Outcome:
    unconsumed: int = 0  # values never read by any member
    duplicates: int = 0  # values read more than once
    commits_failed: int = 0
    commits_ok: int = 0
    committed: dict[int, int] = field(default_factory=dict)  # partition → committed offset (-1: none)
    log_end: dict[int, int] = field(default_factory=dict)
    coordinator: int = -1  # the broker id killed
    settle_s: float = -1  # seconds from the restart until every record was read and committed; -1: never
    members: dict[str, str] = field(default_factory=dict)  # member file → its last assignment
    assignments: int = 0  # assignments received, over every member (5 at the start; more: rebalances)
    #: a member's first read after an assignment, below an offset of that partition whose commit had
    #: already been acknowledged: (partition, acknowledged, read from)
    lost_commits: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return (self.unconsumed == 0 and not self.lost_commits
                and all(self.committed.get(p, -1) == e for p, e in self.log_end.items()))

    def describe(self) -> str:
        lag = {p: (self.committed.get(p, -1), e) for p, e in self.log_end.items() if self.committed.get(p, -1) != e}
        return (f"coordinator {self.coordinator}: unconsumed {self.unconsumed}, twice {self.duplicates}, commits "
                f"{self.commits_ok} ok / {self.commits_failed} failed, lagging commits {lag}, "
                f"lost commits {self.lost_commits}, {self.assignments} assignments, "
                f"settled after {self.settle_s:.1f} s, last assignments {self.members}")


def lost_commits(streams: list[list[dict]]) -> list[tuple[int, int, int]]:  # type: ignore[type-arg]
    """Where a member resumed a partition below a commit already acknowledged for it (any member's):
    the coordinator lost an acknowledged offset commit. Re-reading from the last acknowledged commit
    is at-least-once delivery and fine; from before it is not. Events of different members are
    ordered by their wall-clock stamps (one machine): a commit is logged after its answer, an
    assignment before the member fetches its committed offsets."""
    acked = sorted((e["t"], int(p), int(o)) for evs in streams for e in evs
                   if e["ev"] == "commit" and e["ok"] for p, o in (e.get("offsets") or {}).items())
    out = []
    for evs in streams:
        fresh: dict[int, float] = {}  # partition → when it was assigned, until its first read
        for e in evs:
            if e["ev"] == "assign":
                fresh = {int(p): e["t"] for p in e["parts"]}
            elif e["ev"] == "rec" and e["p"] in fresh:
                at = fresh.pop(e["p"])
                before = [o for t, p, o in acked if p == e["p"] and t < at]
                if before and e["o"] < max(before):
                    out.append((e["p"], max(before), e["o"]))
    return out


def _admin(cluster: list[BrokerProc]):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in cluster if b.alive()), "logger": quiet})


def coordinator_of(cluster: list[BrokerProc], group: str) -> int:
    from confluent_kafka import KafkaException

    try:
        a = _admin(cluster)  # kept alive until its future resolves
        return int(a.describe_consumer_groups([group])[group].result(10).coordinator.id)
    except (KafkaException, TimeoutError):
        return -1


def committed_offsets(cluster: list[BrokerProc], group: str) -> dict[int, int]:
    """The group's committed offsets as its coordinator answers them (-1: none); {} while it cannot."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster if b.alive()), "group.id": group,
                  "logger": quiet})
    try:
        got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=5)
        return {tp.partition: (tp.offset if tp.offset >= 0 else -1) for tp in got}
    except KafkaException:
        return {}
    finally:
        c.close()


def log_ends(cluster: list[BrokerProc]) -> dict[int, int]:
    """Each partition's high watermark; {} while a leader does not answer."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster if b.alive()), "group.id": "probe",
                  "logger": quiet})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    except KafkaException:
        return {}
    finally:
        c.close()


def _read_events(path: Path) -> list[dict]:  # type: ignore[type-arg]
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line being written
            out.append(json.loads(line))
    return out


def replica_assignment(coordinator: int, led: tuple[int, ...], brokers: int = 3) -> list[list[int]]:
    """Each partition's replicas, the first its preferred leader: the coordinator's broker for the
    partitions in `led`, the other brokers in turn for the rest."""
    others = [b for b in range(1, brokers + 1) if b != coordinator]
    out = []
    for p in range(PARTITIONS):
        first = coordinator if p in led else others[p % len(others)]
        out.append([first, *[b for b in range(1, brokers + 1) if b != first]])
    return out


def run(root: Path, zk: LocalZooKeeper, *, bugs: tuple[str, ...] = (), wait_s: float = 120,
        extra: tuple[str, ...] = (), preload: bool = False, group: str = GROUP, churn: bool = False,
        coordinator_leads: tuple[int, ...] | None = None) -> Outcome:
    """One run of the scenario; every process it starts is stopped before it returns. `churn`: the
    aiokafka member is SIGKILLed with the coordinator and a new one started, so the group also
    rebalances across the failover (its old member expires on the new coordinator). Members also
    commit when idle: a rebalance (which Kafka may do across a coordinator failover: CI saw one in
    the steady case, every member re-reading its last 3 records) makes a member read again what it
    read since its last commit, and its reads would then stop short of the next multiple of 20 with
    the last few uncommitted. What a re-read must not do is start below an acknowledged commit
    (`lost_commits`)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    cluster = make_cluster(root, zk, session_ms=6000, lag_ms=10000, bugs=bugs, extra=extra)
    members: list[tuple[subprocess.Popen[bytes], Path]] = []
    out = Outcome()
    try:
        a = _admin(cluster)
        wait_for(lambda: len(a.list_topics(timeout=10).brokers) == 3, 30, "three brokers")
        if coordinator_leads is None:
            new = NewTopic(TOPIC, PARTITIONS, 3)
        else:  # the group's coordinator is known first (its lookup creates __consumer_offsets)
            c = wait_for(lambda: max(coordinator_of(cluster, group), 0), 60, "the group's coordinator")
            new = NewTopic(TOPIC, PARTITIONS, -1, replica_assignment=replica_assignment(c, coordinator_leads))
        for f in a.create_topics([new]).values():
            f.result(15)
        boot = ",".join(b.bootstrap for b in cluster)

        def start_member(i: int, kind: str) -> None:
            path = root / f"member-{i}-{kind}.jsonl"
            log = open(root / f"member-{i}-{kind}.log", "ab")  # noqa: SIM115 - owned by the process
            args = [sys.executable, str(MEMBER), kind, boot, group, TOPIC, str(path), "20", "idle"]
            members.append((subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT), path))

        def start_members() -> None:
            for i, kind in enumerate(KINDS):
                start_member(i, kind)

        prod = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "logger": quiet})
        victim: BrokerProc | None = None
        killed_at = 0.0
        restarted = False

        def read() -> int:
            return len({e["v"] for _, path in members for e in _read_events(path) if e["ev"] == "rec"})

        def kill() -> None:
            nonlocal victim, killed_at
            out.coordinator = wait_for(lambda: max(coordinator_of(cluster, group), 0), 30, "the group's coordinator")
            victim = cluster[out.coordinator - 1]
            victim.kill()
            killed_at = time.monotonic()
            if churn:
                members[len(KINDS) - 1][0].kill()
                start_member(len(KINDS), KINDS[-1])

        if preload:  # every record written first; the kill comes once the group has read KILL_AT
            for v in range(RECORDS):
                prod.produce(TOPIC, str(v).encode(), partition=v % PARTITIONS)
                prod.poll(0)
            assert prod.flush(60) == 0
            start_members()
            wait_for(lambda: read() >= KILL_AT, 60, f"{KILL_AT} records read")
            kill()
        else:  # written as the group reads; the kill comes once KILL_AT are written
            start_members()
            for v in range(RECORDS):
                prod.produce(TOPIC, str(v).encode(), partition=v % PARTITIONS)
                prod.poll(0)
                time.sleep(0.01)
                if v == KILL_AT:
                    kill()
                if victim is not None and not restarted and time.monotonic() - killed_at >= 10:
                    victim.start()
                    restarted = True
        if victim is not None and not restarted:
            time.sleep(max(0.0, 10 - (time.monotonic() - killed_at)))
            victim.start()
        restart_at = time.monotonic()
        assert prod.flush(60) == 0, "the producer could not deliver every record"
        out.log_end = wait_for(lambda: (e := log_ends(cluster)) and sum(e.values()) == RECORDS and e, 30,
                            "every record in the log")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            seen = {e["v"] for _, path in members for e in _read_events(path) if e["ev"] == "rec"}
            out.committed = committed_offsets(cluster, group)
            if len(seen) == RECORDS and out.committed == out.log_end:
                out.settle_s = time.monotonic() - restart_at
                break
            time.sleep(1)
    finally:
        for proc, _ in members:
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in members:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for b in cluster:
            b.kill()
    reads: dict[int, int] = {}
    streams = [_read_events(path) for _, path in members]
    out.lost_commits = lost_commits(streams)
    for (_, path), evs in zip(members, streams, strict=True):
        out.assignments += sum(1 for e in evs if e["ev"] == "assign")
        for e in evs:
            if e["ev"] == "rec":
                reads[e["v"]] = reads.get(e["v"], 0) + 1
            elif e["ev"] == "commit":
                if e["ok"]:
                    out.commits_ok += 1
                else:
                    out.commits_failed += 1
        assigns = [e["parts"] for e in evs if e["ev"] == "assign"]
        out.members[path.name] = str(assigns[-1] if assigns else None)
    out.unconsumed = RECORDS - len(reads)
    out.duplicates = sum(1 for n in reads.values() if n > 1)
    return out


def main(argv: list[str]) -> int:
    import tempfile

    runs = int(argv[0]) if argv else 3
    preload = "--preload" in argv
    vary = "--vary" in argv  # a group per run, so the coordinator lands on each broker in turn
    churn = "--churn" in argv
    bad = 0
    for i in range(runs):
        root = Path(tempfile.mkdtemp(prefix=f"group-failover-{i}-"))
        zk = LocalZooKeeper(root).start()
        try:
            o = run(root, zk, preload=preload, group=f"{GROUP}-{i}" if vary else GROUP, churn=churn)
        finally:
            zk.stop()
        bad += not o.clean
        print(f"run {i} ({root}): {'clean' if o.clean else 'STUCK'}: {o.describe()}", flush=True)
    print(f"{bad} of {runs} runs stuck")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
