"""Coverage probes: named points in the broker's code that count when a rare, dangerous path is taken.

A VALID verdict cannot tell "the cluster is correct" from "the run never got near the bug"; a probe
can. Each name below is one dangerous state of Kafka's design or history, with a one-line
description. Code places a probe once, at import:

    _TRUNCATED_BELOW_HW = probe("follower-truncates-below-hw")
    ...
    if cut < p.hw:
        _TRUNCATED_BELOW_HW()

`probe(name)` refuses a name that is not registered here (a typo fails at import, it can never
silently count nothing), and a hit costs a dict update. Counts are per process, or per *scope*: a
simulator runs many brokers in one process and installs `set_scope` so each broker counts its own.
A real broker given `probes.dir` writes its counts to a file of its own there when a probe is hit
for the first time and whenever `flush` is called (a SIGKILL loses at most the repeats since then);
`logbroker.dump --probes-dir` sums a node's files for the run's collect phase.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: name -> what dangerous state it marks (the README's table is generated from this)
PROBES: dict[str, str] = {
    # --- truncation and leader epochs (KIP-101, KIP-279) ---
    "follower-truncates-below-hw":
        "a follower cuts its log below its own high watermark (records it had counted committed)",
    "follower-truncates-uncommitted-tail": "a follower cuts records above its HW that the new leader does not have",
    "truncation-steps-below-diverged-epoch":
        "the OffsetForLeaderEpoch search finds diverged epochs and asks again about an older one (KIP-279's rounds)",
    "truncation-leader-knows-no-epoch":
        "the leader knows none of the follower's epochs; the follower falls back to its HW",
    "truncation-request-failed":
        "an OffsetForLeaderEpoch round fails (leader moved or unreachable) and the follower retries it",
    "truncation-reopens-transaction": "a truncation cuts a transaction marker, so the transaction is open again",
    "leader-elected-after-lagging-follow":
        "a replica that became follower with its HW behind its LEO is elected before its HW reached that LEO "
        "(KIP-101's double failover)",
    "leader-elected-hw-below-leo":
        "a replica becomes leader with records above its HW (they commit only once its new ISR has them)",
    "follower-fetches-beyond-leader-leo":
        "a follower fetches past the leader's log end (it holds records the new leader never had)",
    # --- fencing by epochs ---
    "stale-controller-epoch-order":
        "a LeaderAndIsr/StopReplica from an older controller epoch arrives (a zombie controller)",
    "stale-leader-epoch-order": "a LeaderAndIsr/StopReplica carries an older leader epoch than the replica's",
    "controller-request-stale-broker-epoch":
        "a controller request addressed to an earlier registration of this broker arrives late (KIP-380)",
    "controller-request-before-registration":
        "a controller request reaches a restarted broker before it registered: it waits for the broker epoch",
    "update-metadata-out-of-order":
        "an UpdateMetadata older than the one already applied arrives (a cut connection's retransmission)",
    "leader-and-isr-stale-isr-version":
        "a same-epoch LeaderAndIsr carries an ISR older than the one the replica has (a late delivery)",
    "offsets-for-epoch-fenced":
        "OffsetForLeaderEpoch names a leader epoch other than the leader's (an old or a future leader)",
    "fetch-fenced-leader-epoch":
        "a Fetch names a leader epoch other than the leader's (fenced or unknown leader epoch)",
    "fetch-offset-out-of-range":
        "a Fetch asks for an offset the leader does not have (beyond its LEO or below its log start)",
    # --- ISR and AlterIsr (KIP-497) ---
    "isr-shrink-proposed": "a leader proposes dropping lagging followers from the ISR",
    "isr-shrink-with-produce-waiting": "an ISR shrink is proposed while an acks=all produce waits on the partition",
    "isr-below-min-insync-with-produce-waiting":
        "the ISR falls below min.insync.replicas while an acks=all produce waits",
    "isr-below-min-insync": "the controller commits an ISR smaller than min.insync.replicas",
    "isr-expand-proposed": "a follower that caught up is proposed back into the ISR",
    "alter-isr-stale-broker-epoch": "the controller refuses an AlterIsr from an older broker epoch (a bounced leader)",
    "alter-isr-fenced-leader-epoch":
        "the controller refuses an AlterIsr from a leader or leader epoch it no longer has",
    "alter-isr-version-conflict": "the controller refuses an AlterIsr based on an old partition-state version",
    "alter-isr-controller-unavailable": "an AlterIsr finds no controller (unknown, moving or failing) and is retried",
    "alter-isr-moot": "an AlterIsr proposal is dropped because its leader lost leadership meanwhile",
    # --- the controller ---
    "controller-failover": "a controller takes over from an earlier one (controller epoch > 1)",
    "controller-failover-during-reassignment": "a new controller finds a replica reassignment under way",
    "controller-resigns-on-stale-version":
        "a controller finds a partition state written by a newer controller and resigns",
    "broker-bounce-detected": "the controller sees a broker registered again with a new broker epoch (KIP-380)",
    "broker-starts-without-its-data":
        "a broker starts with an empty log directory (a first start or a lost disk, KIP-966)",
    "unclean-leader-election": "a replica outside the ISR is elected (committed data may be lost)",
    "elr-leader-elected": "an eligible leader replica outside the dead ISR is elected (KIP-966)",
    "partition-offline-with-live-laggard":
        "a partition goes offline while a live replica outside the ISR could have led",
    "leader-elected-sole-isr": "a leader is elected with itself as the whole ISR",
    "reassignment-completed": "a replica reassignment completes and removes replicas",
    "preferred-leader-election": "leadership moves to the preferred replica (operator or automatic rebalance)",
    # --- produce and the purgatory ---
    "produce-waiting-leadership-moved": "an acks=all produce waiting in purgatory loses its partition's leadership",
    "produce-timed-out-in-purgatory": "an acks=all produce times out in purgatory before its HW came",
    "produce-isr-shrank-after-append":
        "an acks=all produce is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank while it waited)",
    "produce-refused-not-enough-replicas":
        "an acks=all produce is refused: the ISR is smaller than min.insync.replicas",
    "produce-duplicate-batch": "an idempotent producer's retry is recognised as a duplicate and not written twice",
    "produce-out-of-order-sequence": "a produce has a sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER)",
    "produce-stale-producer-epoch": "a produce comes from a fenced (older) producer epoch",
    "follower-fetch-partition-error":
        "a follower's fetch of a partition is answered with an error (leader moved, fenced, out of range)",
    "fetch-session-refused": "a follower's incremental fetch session is refused (the leader restarted or evicted it)",
    # --- consumer groups ---
    "group-commit-during-rebalance": "an offset commit arrives while its group rebalances (REBALANCE_IN_PROGRESS)",
    "group-commit-illegal-generation": "an offset commit from an old generation or unknown member is refused",
    "group-coordinator-moved-with-members": "a group coordinator unloads a group whose members wait on a join or sync",
    "group-commit-coordinator-lost-in-flight":
        "an offset commit's write completes after its coordinator lost the partition",
    # --- transactions (KIP-98, KIP-890) ---
    "txn-coordinator-loads-prepared": "a transaction coordinator takes over a PrepareCommit/PrepareAbort still pending",
    "txn-coordinator-unloads-with-markers-pending":
        "a transaction coordinator loses its partition with markers still to write",
    "txn-timed-out-aborted": "an open transaction times out and the coordinator fences and aborts it",
    "txn-marker-leader-lost": "a transaction marker's partition loses its leader before the ISR has the marker",
    "txn-marker-refused": "a transaction marker is refused (older producer or coordinator epoch: a zombie coordinator)",
    "txn-write-opens-transaction":
        "a transactional batch would open a transaction at a partition (what KIP-890 verifies with the coordinator)",
    "txn-write-not-in-transaction":
        "the coordinator says a transactional write's partition is not in its transaction (KIP-890 refuses it)",
    "txn-concurrent-transactions":
        "a producer's InitProducerId finds its transaction still open; it is fenced and aborted first",
    "producer-id-block-not-ready":
        "InitProducerId finds no producer id at hand (the broker's block is still being claimed from ZooKeeper)",
}

#: bug switch (`bugs.Bug` value) -> the probe of the scenario it breaks: a run with the switch on
#: whose probe was not hit never got near the bug, whatever its verdict
BUG_PROBES: dict[str, str] = {
    "truncate-to-hw": "leader-elected-after-lagging-follow",
    "ack-before-replication": "produce-waiting-leadership-moved",
    "local-isr-shrink": "isr-shrink-with-produce-waiting",
    "stale-epoch-accepted": "stale-controller-epoch-order",
    "lso-ignores-open-txns": "txn-write-opens-transaction",
    "marker-ack-before-replication": "truncation-reopens-transaction",
    "no-txn-verification": "txn-write-opens-transaction",
    "forget-prepared-txns": "txn-coordinator-loads-prepared",
    "lost-disk-in-isr": "broker-starts-without-its-data",
}

Counts = dict[str, int]

#: every name placed by a `probe(...)` call (a test checks that each registered probe is placed)
PLACED: set[str] = set()
_PROCESS: Counts = {}
_scope: Callable[[], Counts | None] | None = None
_file: Path | None = None
#: `LOGBROKER_PROBES=off` in a broker's environment makes every probe a no-op (read once, at import).
#: Nothing runs that way but the broker benchmark's measure of what probes cost
#: (`cluster-impl/bench/broker.py --probes-cost`); a run without probes could not say what it reached.
_OFF = os.environ.get("LOGBROKER_PROBES", "on") == "off"


class Probe:
    """One placed probe: calling it counts a hit in the current scope."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self) -> None:
        counts = _scope() if _scope is not None else None
        if counts is None:
            counts = _PROCESS
        n = counts.get(self.name, 0)
        counts[self.name] = n + 1
        if n == 0 and _file is not None and counts is _PROCESS:
            flush()


class _Silent(Probe):
    """A probe that counts nothing (`LOGBROKER_PROBES=off`)."""

    __slots__ = ()

    def __call__(self) -> None:
        return None


def probe(name: str) -> Probe:
    """The probe `name`, for a call site; an unregistered name is a KeyError at import."""
    if name not in PROBES:
        raise KeyError(f"unknown probe {name!r}: register it in logbroker/probes.py first")
    PLACED.add(name)
    return _Silent(name) if _OFF else Probe(name)


def set_scope(scope: Callable[[], Counts | None] | None) -> Callable[[], Counts | None] | None:
    """Count into what `scope()` returns (None: the process's own counts) — a simulator's per-broker
    counts; `None` restores the default. Returns the scope it replaces, to be put back."""
    global _scope
    before, _scope = _scope, scope
    return before


@contextmanager
def counting() -> Iterator[Counts]:
    """The probes hit inside the block, counted apart (the scope installed before is put back): how
    a test shows that its scenario takes a probe's path."""
    got: Counts = {}
    before = set_scope(lambda: got)
    try:
        yield got
    finally:
        set_scope(before)


def process_counts() -> Counts:
    """This process's counts (outside any scope)."""
    return dict(_PROCESS)


def persist_to(directory: Path) -> Path:
    """Write this process's counts into a file of its own under `directory` from now on."""
    global _file
    directory.mkdir(parents=True, exist_ok=True)
    # a process's own name: a restarted broker in a container may get its predecessor's pid again
    _file = directory / f"probes-{os.getpid()}-{os.urandom(4).hex()}.json"
    flush()
    return _file


def flush() -> None:
    """Write the process's counts to its file (atomically), if it has one."""
    if _file is None:
        return
    tmp = _file.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(dict(sorted(_PROCESS.items()))))
        tmp.replace(_file)
    except OSError:
        pass  # a full or vanished disk must never stop the broker; the counts are only evidence


def merge(parts: Iterable[Mapping[str, int]]) -> Counts:
    """The sum of several count maps (a node's processes, a cluster's nodes, a night's runs)."""
    out: Counts = {}
    for part in parts:
        for name, n in part.items():
            out[name] = out.get(name, 0) + int(n)
    return dict(sorted(out.items()))


def read_dir(directory: Path) -> Counts:
    """The sum of every process's file under `directory` (unreadable ones are skipped)."""
    parts = []
    for f in sorted(directory.glob("probes-*.json")) if directory.is_dir() else []:
        try:
            parts.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    return merge(parts)


def node_file(counts: Mapping[str, int], processes: int) -> dict[str, object]:
    """A node's `probes.json`: its counts, and the registry they are counted against (names with their
    descriptions, and each bug switch's probe), so a run's files say what was not hit without the
    reader importing this broker."""
    return {"counts": dict(sorted(counts.items())), "processes": processes, "probes": PROBES,
            "bug_probes": BUG_PROBES}


def table() -> str:
    """The README's table of probes (Markdown), with the bug switches that map to each."""
    by_probe: dict[str, list[str]] = {}
    for bug, name in BUG_PROBES.items():
        by_probe.setdefault(name, []).append(bug)
    rows = ["| probe | dangerous state | bug switch |", "|---|---|---|"]
    for name, text in PROBES.items():
        rows.append(f"| `{name}` | {text} | {', '.join(f'`{b}`' for b in sorted(by_probe.get(name, [])))} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")  # `python -m logbroker.probes`: the README's table, to paste after a change
