"""A quick screen of a simulated run for the loss and divergence anomalies, in plain Python.

`chaos sim-search` simulates seeds by the hundred; starting Spark for each would cost more than the
simulation. The screen reads the history through the kernel's one reader and the replica dumps, and
names what it finds, by the checks' names and definitions (`results/anomalies.py`), for the subset
that says "data was lost or diverged": `lost-write`, `inconsistent-offsets`, `duplicate`,
`unexpected`, `unseen` (after a complete drain), `hanging-transaction` (measured by the harness),
and `G1a` (a send reported as failed was read: the
client or the broker called a write a failure that happened). A screened failure is then confirmed by the
real check (Spark) on the saved run; the screen never decides a verdict on its own.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from kernel.history import HistoryScan, OpType, read_ops, reads, writes
from results.hanging import hanging_anomalies


def screen(run_dir: Path, *, idempotent: bool = True) -> dict[str, int]:
    """anomaly name -> count (empty when the screen finds nothing). Without idempotent producers a
    retried send may be written twice, so `duplicate` is not looked for (the checker does not count
    it as bad then either)."""
    acked: dict[tuple[int, int], int] = {}  # (key, offset) -> value, acknowledged sends
    sent: set[int] = set()
    failed: set[tuple[int, int]] = set()  # (key, value) of sends that definitely failed
    seen: dict[tuple[int, int], set[int]] = defaultdict(set)  # (key, offset) -> values read
    offsets_of: dict[int, set[tuple[int, int]]] = defaultdict(set)  # value -> (key, offset) observed
    max_read: dict[int, int] = {}
    read_values: set[int] = set()
    times_read: Counter[tuple[int, int]] = Counter()  # (key, value) -> reads: G1a once every fail is known
    out: dict[str, int] = defaultdict(int)
    facts = HistoryScan(run_dir / "history.jsonl")  # the drain's ops, as the check judges them
    for op in read_ops(facts.path, facts):
        if not op.is_client:
            continue
        if op.type is OpType.INVOKE:
            sent.update(w.value for w in writes(op))
            continue
        if op.type is OpType.FAIL:
            failed.update((w.key, w.value) for w in writes(op))
        if op.type is OpType.OK:
            for w in writes(op):
                if w.offset is not None:
                    if acked.setdefault((w.key, w.offset), w.value) != w.value:
                        out["inconsistent-offsets"] += 1
                    offsets_of[w.value].add((w.key, w.offset))
            for r in reads(op):
                times_read[(r.key, r.value)] += 1
                seen[(r.key, r.offset)].add(r.value)
                offsets_of[r.value].add((r.key, r.offset))
                read_values.add(r.value)
                max_read[r.key] = max(max_read.get(r.key, -1), r.offset)
    for (key, offset), values in seen.items():
        if len(values | ({acked[(key, offset)]} if (key, offset) in acked else set())) > 1:
            out["inconsistent-offsets"] += 1
        out["unexpected"] += len(values - sent)
    out["G1a"] += sum(times_read[kv] for kv in failed)
    meta_file = run_dir / "test.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    drained = facts.drain_complete(meta)
    for (key, offset), value in acked.items():
        if value in read_values:
            continue
        if offset < max_read.get(key, -1):
            out["lost-write"] += 1
        elif drained:
            out["unseen"] += 1
    if idempotent:
        out["duplicate"] += sum(1 for places in offsets_of.values() if len(places) > 1)
    out["inconsistent-offsets"] += _replica_divergence(run_dir, acked, seen)
    for name, d in hanging_anomalies(meta, 1).items():  # measured before the drain (`harness.hanging`)
        out[name] += d["count"]
    return {k: v for k, v in sorted(out.items()) if v}


def _replica_divergence(run_dir: Path, acked: dict[tuple[int, int], int],
                        seen: dict[tuple[int, int], set[int]]) -> int:
    """Committed replica records (below the replica's HW) that disagree with each other or the history."""
    committed: dict[tuple[int, int], set[int]] = defaultdict(set)
    for f in sorted((run_dir / "replicas").glob("*/*.jsonl")):
        lines = f.read_text().splitlines()
        if not lines:
            continue
        head = json.loads(lines[0])
        key = int(head["partition"])
        for line in lines[1:]:
            rec = json.loads(line)
            if int(rec["offset"]) < int(head["hw"]):
                committed[(key, int(rec["offset"]))].add(int(rec["value"]))
    bad = 0
    for ko, values in committed.items():
        known = values | seen.get(ko, set()) | ({acked[ko]} if ko in acked else set())
        if len(known) > 1:
            bad += 1
    return bad
