"""Our checks and Jepsen's own Kafka checker (`jepsen.tests.kafka/checker`, the shared build) agree on
every corpus history — Jepsen's own `kafka_test.clj` cases (`corpus/jepsen-*`) among them — on two
short real runs, and on two real transactional runs (`txn_runs/`): the same verdict and the same
anomaly types, apart from the differences `results/README.md` documents on purpose (each named in
`DOCUMENTED` or `OURS_ONLY` below). `CHAOS_AGREE_RUNS=DIR[:DIR...]` adds every run under those
directories (a measurement's own runs, compared by the same rules).

Both read the same input: the history alone (Jepsen's checker does not read replica dumps, so our
`divergent-replicas` and replica-based `inconsistent-offsets` are out of this comparison by
construction), with `--sub-via` from the run's test.json; Jepsen's checks all run in one JVM
(`jepsen_batch.clj`, the shared build's front end looped). We always draw write-write (offset order)
edges and report the cycles found with and without them (`results.cycles`); Jepsen draws them only
with `--ww-deps`. So Jepsen runs once as it is by default, whose verdict we must match, and, where we
report a cycle or its test asks for it, once more with `--ww-deps`: the types are compared with the
union of both runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.history import scan
from results.check import CheckResult, check_runs, sub_via
from results.cycles import CYCLE_TYPES
from results.exactly_once import NAMES as EXACTLY_ONCE

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
FIXTURES = HERE.parent / "results" / "fixtures"
#: real transactional runs (`--txn`): a clean one on containers, and a simulated one caught with
#: `lso-ignores-open-txns` (seed 5, no faults: aborted reads, and the skips they leave)
TXN_RUNS = HERE / "txn_runs"


def _extra_runs() -> list[Path]:
    """The runs under each directory `CHAOS_AGREE_RUNS` names (`os.pathsep`-separated: run
    directories or whole stores): how a measurement compares the two checkers on runs of its own
    (docs/measurements/transactions.md) with the same rules as the fixed cases."""
    roots = [Path(p) for p in os.environ.get("CHAOS_AGREE_RUNS", "").split(os.pathsep) if p]
    # resolved: a store's `latest` is a link to a run found under its own name too
    return sorted({h.resolve().parent for root in roots for h in root.rglob("history.jsonl")})


SOURCES = (sorted(p for p in CORPUS.iterdir() if p.is_dir()) + sorted(p for p in FIXTURES.iterdir() if p.is_dir())
           + sorted(p for p in TXN_RUNS.iterdir() if p.is_dir()) + _extra_runs())
pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _has_mops(history: str) -> bool:
    return any(f'"f":"{f}"' in history.replace(" ", "") for f in ("send", "poll", "txn"))


def _acked_never_polled(history: str) -> bool:
    """Some value an ok op sent that no ok op polled (what unseen means)."""
    sent, polled = set(), set()
    for line in history.splitlines():
        op = json.loads(line) if line.strip() else {}
        if op.get("type") != "ok" or op.get("f") not in ("send", "poll", "txn"):
            continue
        for m in op["value"]:
            if m[0] == "send":
                sent.add((m[1], m[2][1] if isinstance(m[2], list) else m[2]))
            elif len(m) > 1 and m[1]:
                polled.update((int(k), v) for k, pairs in m[1].items() for _, v in pairs)
    return bool(sent - polled)


def _inconsistent(ours: set[str], history: str) -> bool:
    return "inconsistent-offsets" in ours


def _cycle(kind: str) -> Callable[[set[str], str], bool]:
    """When a cycle type may differ: through an offset that holds two values (see DOCUMENTED), or,
    for a realtime variant, when ours found its base type too. Elle's own anomaly lattice says G0
    implies G0-realtime (and G1c, G1c-realtime), yet its search reports a realtime variant only for
    a cycle it meets whose steps classify as exactly that type; in an SCC that also holds pure-ww
    cycles it may meet none. Container run seed 4006 (2026-11-29, txn workload): ours G0-realtime
    with the cycle 460 -rt-> 466 -ww-> 464 -ww-> 460 (checked by hand against the offsets and
    times); Jepsen's checker with --ww-deps G0, G1c and G1c-realtime, no G0-realtime."""
    base = kind.removesuffix("-realtime")

    def differs(ours: set[str], history: str) -> bool:
        return _inconsistent(ours, history) or (base != kind and base in ours)
    return differs


#: results/README.md, "Jepsen's checker": what Jepsen reports beyond ours, and when
DOCUMENTED: dict[str, Callable[[set[str], str], bool]] = {
    # Jepsen's unseen counts every acknowledged value never read; ours leaves the lost writes out. And
    # where the last ok op polled a key no ok op had sent to, Jepsen's unseen keeps what it polled (it
    # merges the polled sets into the sent ones where a key has no sends, then subtracts)
    "unseen": lambda ours, history: "lost-write" in ours or not _acked_never_polled(history),
    # two values at one offset: Jepsen also calls the unread one at the highest read offset lost
    "lost-write": lambda ours, history: "inconsistent-offsets" in ours,
    # Jepsen indexes reads by value, so a value read at two offsets in offset order looks rewound
    "int-nonmonotonic-poll": lambda ours, history: "duplicate" in ours,
    # a poll's rebalance log: Jepsen 0.3.11 reads only an event's `keys` (not `revoked`/`assigned`)
    # within a poll, and never between polls; we forget a key's last read when a rebalance names it
    "int-poll-skip": lambda ours, history: '"revoked"' in history,
    "poll-skip": lambda ours, history: '"revoked"' in history,
    # Elle's dependency graph had no edge (one transaction alone, or ones that share nothing): that
    # says nothing was related, not that nothing was tested; ours says so only with no send or poll
    "empty-transaction-graph": lambda ours, history: _has_mops(history),
    # an offset that holds two values: Jepsen's version order keeps the first of a hash set, ours the
    # smallest value, and the ww edges through that offset follow the choice; and a realtime variant
    # of a base type both found (`_cycle`)
    **{t: _cycle(t) for t in CYCLE_TYPES},
}
#: Elle's coarse "some cycle exists in the graph restricted to ..." findings, reported beside the named
#: cycle they stand for; we report the named cycle
CYCLE_EXISTS = ("PL-1-cycle-exists", "PL-2-cycle-exists", "strong-PL-1-cycle-exists", "strong-PL-2-cycle-exists")
#: what we report beyond Jepsen, and when (results/README.md)
OURS_ONLY: dict[str, Callable[[set[str], str], bool]] = {
    # Jepsen's by-value index keeps one value per offset, so with two values at one offset the other
    # values have no index and their ops' order is not judged; ours places each by its own offset
    "nonmonotonic-send": _inconsistent,
    "nonmonotonic-poll": _inconsistent,
    # the ww edges through an offset that holds two values, and realtime variants (see DOCUMENTED)
    **{t: _cycle(t) for t in CYCLE_TYPES},
    # measured by our harness (LSO and ListTransactions) and read from test.json; Jepsen's checker
    # reads the history alone, where a hanging transaction leaves no trace
    "hanging-transaction": lambda _mine, _history: True,
    # exactly-once over consume-transform-produce transactions (results/exactly_once.py): Jepsen's
    # model has no transaction whose sends come from its reads, nor the group's offsets inside it
    **{t: (lambda _mine, _history: True) for t in EXACTLY_ONCE},
}


def _jepsen(tool: str, jobs: list[tuple[Path, bool]], work: Path) -> list[dict[str, Any]]:
    """Jepsen's checker on each (run, ww_deps), all in one JVM (`jepsen_batch.clj`: what the shared
    build's front end does per history, without a JVM start per history)."""
    spec = []
    for run, ww_deps in jobs:
        test_json = json.loads((run / "test.json").read_text()) if (run / "test.json").exists() else None
        spec.append({"history": str(run / "history.jsonl"), "sub-via": ",".join(sub_via(test_json)),
                     "ww-deps": ww_deps})
    (work / "jobs.json").write_text(json.dumps(spec))
    lib = Path(tool).resolve().parent / "lib"
    proc = subprocess.run(["java", "-Xmx2g", "-Djava.awt.headless=true", "-cp", f"{lib}/*", "clojure.main",
                           str(HERE / "jepsen_batch.clj"), str(work / "jobs.json"), str(work / "out.jsonl")],
                          capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = [json.loads(line) for line in (work / "out.jsonl").read_text().splitlines()]
    assert len(out) == len(jobs)
    return out


def _asks_for_ww(run: Path) -> bool:
    meta = run / "jepsen.json"
    return meta.exists() and bool(json.loads(meta.read_text()).get("ww_deps"))


@pytest.fixture(scope="module")
def both(spark: Any, jepsen_check: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("agree")
    runs = []
    for src in SOURCES:
        run = root / src.name
        run.mkdir()
        for name in ("history.jsonl", "test.json", "jepsen.json"):
            if (src / name).exists():
                shutil.copy(src / name, run / name)
        runs.append(run)
    ours = check_runs(runs, spark_master="local[2]", perf=False, elle_cli="")
    ww = [run for run, mine in zip(runs, ours, strict=True)
          if (isinstance(mine, CheckResult) and any(t in CYCLE_TYPES for t in mine.anomalies)) or _asks_for_ww(run)]
    got = _jepsen(jepsen_check, [(r, False) for r in runs] + [(r, True) for r in ww], root)
    plain, with_ww = got[:len(runs)], dict(zip(ww, got[len(runs):], strict=True))
    return {r.name: (o, (p, with_ww.get(r))) for r, o, p in zip(runs, ours, plain, strict=True)}


@pytest.mark.parametrize("case", [p.name for p in SOURCES])
def test_same_verdict_and_anomaly_types_as_jepsen(both: dict[str, Any], case: str) -> None:
    ours, (plain, ww) = both[case]
    assert isinstance(ours, CheckResult)
    mine = set(ours.anomalies)
    if "unexpected" in mine:
        # Jepsen's checker throws on a value nobody sent (no-writer-of-value): it cannot judge
        assert plain["valid?"] == "unknown" and plain.get("checker-crashed"), plain
        return
    assert ours.run_dir is not None
    history = (ours.run_dir / "history.jsonl").read_text()
    jepsen = (set(plain["error-types"]) | set(ww["error-types"] if ww else ())) - set(CYCLE_EXISTS)
    extra = {t for t in jepsen - mine if t in DOCUMENTED and DOCUMENTED[t](mine, history)}
    only_ours = {t for t in mine - jepsen if t in OURS_ONLY and OURS_ONLY[t](mine, history)}
    assert jepsen - extra == mine - only_ours, f"ours {sorted(mine)}, Jepsen {sorted(jepsen)}"
    # the verdict: Jepsen's by default (no ww edges), less what it judges on purpose otherwise
    test_json = json.loads((ours.run_dir / "test.json").read_text()) if (ours.run_dir / "test.json").exists() else {}
    idempotent = test_json.get("config", {}).get("idempotence", True)
    drained = scan(ours.run_dir / "history.jsonl").drain_complete(test_json or None)
    theirs_bad = set(plain["bad-error-types"]) - set(CYCLE_EXISTS) - extra
    if not drained:
        # ours: without a final drain that read to the end, never read says nothing (README); Jepsen
        # does not know whether its final reads finished
        theirs_bad.discard("unseen")
    if not idempotent:
        theirs_bad.discard("duplicate")  # Jepsen cannot know the producers were not idempotent
    assert set(ours.bad_error_types) - only_ours == theirs_bad, (ours.bad_error_types, plain["bad-error-types"])
