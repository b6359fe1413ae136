"""Writes the hand-written check corpus (`corpus/<case>/history.jsonl`, `expected.json`, replicas).

Each case is written out here in a compact form — (process, type, f, value) per op — because
indices and times are bookkeeping; the files are committed so the tests read plain histories.
The cases of Jepsen's own `kafka_test.clj` are transcribed in `jepsen_corpus.py` and written as
`corpus/jepsen-<name>/`, with a `jepsen.json` saying what the Clojure test asserts.
Every anomaly has a case that shows it and a near miss that must not. `expected.json` lists the
anomalies found; whether they make the run invalid is the checker's bad-type rule (docs/design.md, "Anomalies"):
`int-send-skip` is reported but never bad, `duplicate` is not bad for non-idempotent producers. Re-run after editing:
`.venv/bin/python -m tests.checks.make_corpus`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "corpus"
S, P, A = "send", "poll", "assign"


def send(p: int, k: int, v: int, outcome: str = "ok", offset: int | None = None) -> list[tuple[Any, ...]]:
    done = [S, k, [offset, v]] if outcome == "ok" else [S, k, v]
    return [(p, "invoke", S, [[S, k, v]]), (p, outcome, S, [done])]


def poll(p: int, reads: dict[int, list[list[int]]], final: bool = False,
         rebalances: list[dict[str, list[int]]] | None = None) -> list[tuple[Any, ...]]:
    """A poll op; `rebalances` is its `rebalance-log` (revoked/assigned keys during the poll)."""
    done = {"rebalance-log": rebalances} if rebalances is not None else {}
    return [(p, "invoke", P, [[P]], final), (p, "ok", P, [[P, {str(k): v for k, v in reads.items()}]], final, done)]


def assign(p: int, keys: list[int], f: str = A) -> list[tuple[Any, ...]]:
    return [(p, "invoke", f, keys), (p, "ok", f, keys)]


SUBSCRIBE = {"seed": 1, "config": {"sub_via": ["subscribe"]}, "complete": True}


def sends_op(p: int, mops: list[tuple[int, int, int]]) -> list[tuple[Any, ...]]:
    """One op with several sends: (key, offset, value) each."""
    return [(p, "invoke", S, [[S, k, v] for k, _, v in mops]), (p, "ok", S, [[S, k, [o, v]] for k, o, v in mops])]


def drain(reads: dict[int, list[list[int]]]) -> list[tuple[Any, ...]]:
    return assign(90, list(reads)) + poll(90, reads, final=True)


CASES: dict[str, tuple[list[tuple[Any, ...]], list[str], dict[str, Any] | None]] = {
    "valid-basic": (
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(1, 1, 3, "ok", 0)
        + assign(2, [0, 1])
        + poll(2, {0: [[0, 1], [1, 2]], 1: [[0, 3]]})
        + drain({0: [[0, 1], [1, 2]], 1: [[0, 3]]}),
        [],
        None,
    ),
    "lost-write": (send(0, 0, 1, "ok", 0) + send(0, 0, 2, "ok", 1) + drain({0: [[1, 2]]}), ["lost-write"], None),
    "near-lost-write-info-send": (send(0, 0, 1, "info") + send(0, 0, 2, "ok", 1) + drain({0: [[1, 2]]}), [], None),
    "unseen": (send(0, 0, 1, "ok", 0) + send(0, 0, 2, "ok", 1) + drain({0: [[0, 1]]}), ["unseen"], None),
    # the drain read offset 0, then its next poll could not reach the leader (info): offset 1 was
    # never looked for, so it is reported but not judged, and the verdict is unknown, not invalid
    "near-unseen-drain-gave-up": (
        send(0, 0, 1, "ok", 0) + send(0, 0, 2, "ok", 1) + drain({0: [[0, 1]]})
        + [(90, "invoke", P, [[P]], True), (90, "info", P, [[P]], True, {"error": "NOT_LEADER_FOR_PARTITION"})],
        ["unseen"],
        None,
    ),
    # every acknowledged write was read before the end, then the final drain could not read at all (a
    # topic that lost its records, as Tansu's store did after a crash): no anomaly is in the history, and
    # the end of the log was never read, so the verdict is unknown, never valid
    "near-valid-drain-gave-up": (
        send(0, 0, 1, "ok", 0) + poll(1, {0: [[0, 1]]}) + assign(90, [0])
        + [(90, "invoke", P, [[P]], True), (90, "info", P, [[P]], True, {"error": "UNKNOWN_TOPIC_OR_PARTITION"})],
        [],
        None,
    ),
    # measured by the harness after the drain (harness/hanging.py): key 0's LSO stayed at 1 below its
    # HW 3 — a transaction nobody completes; the history itself is clean
    "hanging-transaction": (
        send(0, 0, 1, "ok", 0) + drain({0: [[0, 1]]}),
        ["hanging-transaction"],
        {"seed": 1, "config": {}, "complete": True,
         "hanging_transactions": {"partitions": {"0": {"lso": 1, "hw": 3}}, "transactions": {}}},
    ),
    "near-hanging-transaction-stable": (
        send(0, 0, 1, "ok", 0) + drain({0: [[0, 1]]}),
        [],
        {"seed": 1, "config": {}, "complete": True,
         "hanging_transactions": {"partitions": {"0": {"lso": 3, "hw": 3}}, "transactions": {}}},
    ),
    # final reads that retried after an info poll (as Jepsen's do) and then ended ok: the drain finished,
    # so what it never read is unseen
    "unseen-drain-retried": (
        send(0, 0, 1, "ok", 0) + send(0, 0, 2, "ok", 1) + assign(90, [0])
        + [(90, "invoke", P, [[P]], True), (90, "info", P, [[P]], True, {"error": "timed out"})]
        + poll(91, {0: [[0, 1]]}, final=True),
        ["unseen"],
        None,
    ),
    "near-unseen-drained": (send(0, 0, 1, "ok", 0) + send(0, 0, 2, "ok", 1) + drain({0: [[0, 1], [1, 2]]}), [], None),
    "inconsistent-offsets": (
        send(0, 0, 1, "ok", 0) + send(1, 0, 9, "info") + drain({0: [[0, 9]]}),
        ["inconsistent-offsets", "unseen"],
        None,
    ),
    "near-inconsistent-offsets": (
        send(0, 0, 1, "ok", 0) + send(1, 0, 9, "info") + drain({0: [[0, 1], [1, 9]]}),
        [],
        None,
    ),
    "duplicate": (send(0, 0, 1, "ok", 0) + drain({0: [[0, 1], [1, 1]]}), ["duplicate"], None),
    "near-duplicate-not-idempotent": (
        send(0, 0, 1, "ok", 0) + drain({0: [[0, 1], [1, 1]]}),
        ["duplicate"],
        {"seed": 1, "config": {"idempotence": False}, "complete": True},
    ),
    "unexpected": (send(0, 0, 1, "ok", 0) + drain({0: [[0, 1], [1, 42]]}), ["unexpected"], None),
    "near-unexpected": (send(0, 0, 1, "ok", 0) + send(1, 0, 42, "info") + drain({0: [[0, 1], [1, 42]]}), [], None),
    "G1a": (send(0, 0, 1, "ok", 0) + send(1, 0, 5, "fail") + drain({0: [[0, 1], [1, 5]]}), ["G1a"], None),
    "near-G1a-info": (send(0, 0, 1, "ok", 0) + send(1, 0, 5, "info") + drain({0: [[0, 1], [1, 5]]}), [], None),
    "poll-skip": (
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0])
        + poll(1, {0: [[0, 1]]})
        + poll(1, {0: [[2, 3]]})
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        ["poll-skip"],
        None,
    ),
    "near-poll-skip-across-assign": (  # key 0 leaves the assignment, so its last read is forgotten
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0])
        + poll(1, {0: [[0, 1]]})
        + assign(1, [1])
        + assign(1, [0])
        + poll(1, {0: [[2, 3]]})
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        [],
        None,
    ),
    "poll-skip-reassign-keeps-key": (  # Kafka's assign keeps a retained key's position (Jepsen's rule)
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0])
        + poll(1, {0: [[0, 1]]})
        + assign(1, [0, 1])
        + poll(1, {0: [[2, 3]]})
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        ["poll-skip"],
        None,
    ),
    "poll-skip-subscribe": (  # reported, but not bad: a consumer that subscribes may be rebalanced
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0], "subscribe")
        + poll(1, {0: [[0, 1]]})
        + poll(1, {0: [[2, 3]]})
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        ["poll-skip"],
        SUBSCRIBE,
    ),
    "near-poll-skip-rebalanced": (  # a rebalance during the poll revoked and re-assigned the key
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0], "subscribe")
        + poll(1, {0: [[0, 1]]})
        + poll(1, {0: [[2, 3]]}, rebalances=[{"revoked": [0], "assigned": []}, {"revoked": [], "assigned": [0]}])
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        [],
        SUBSCRIBE,
    ),
    "near-int-poll-skip-rebalanced": (  # a rebalance during the poll: no order expected within it
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0], "subscribe")
        + poll(1, {0: [[0, 1], [2, 3]]}, rebalances=[{"revoked": [], "assigned": [0]}])
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        [],
        SUBSCRIBE,
    ),
    "nonmonotonic-poll": (
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + assign(1, [0])
        + poll(1, {0: [[0, 1], [1, 2]]})
        + poll(1, {0: [[1, 2]]})
        + drain({0: [[0, 1], [1, 2]]}),
        ["nonmonotonic-poll"],
        None,
    ),
    "near-nonmonotonic-poll-reassigned": (  # key 0 left the assignment and came back: a fresh start
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + assign(1, [0])
        + poll(1, {0: [[0, 1], [1, 2]]})
        + assign(1, [1])
        + assign(1, [0])
        + poll(1, {0: [[0, 1]]})
        + drain({0: [[0, 1], [1, 2]]}),
        [],
        None,
    ),
    "nonmonotonic-poll-reassign-keeps-key": (  # the same assign again keeps the position: a rewind is bad
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + assign(1, [0])
        + poll(1, {0: [[0, 1], [1, 2]]})
        + assign(1, [0])
        + poll(1, {0: [[0, 1]]})
        + drain({0: [[0, 1], [1, 2]]}),
        ["nonmonotonic-poll"],
        None,
    ),
    "nonmonotonic-poll-subscribe": (  # reported, but not bad under subscribe
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + assign(1, [0], "subscribe")
        + poll(1, {0: [[0, 1], [1, 2]]})
        + poll(1, {0: [[0, 1]]})
        + drain({0: [[0, 1], [1, 2]]}),
        ["nonmonotonic-poll"],
        SUBSCRIBE,
    ),
    "int-poll-skip": (
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0])
        + poll(1, {0: [[0, 1], [2, 3]]})
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        ["int-poll-skip"],
        None,
    ),
    "near-int-poll-skip": (
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 0, 3, "ok", 2)
        + assign(1, [0])
        + poll(1, {0: [[0, 1], [1, 2], [2, 3]]})
        + drain({0: [[0, 1], [1, 2], [2, 3]]}),
        [],
        None,
    ),
    "int-nonmonotonic-poll": (
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + assign(1, [0])
        + poll(1, {0: [[1, 2], [0, 1]]})
        + drain({0: [[0, 1], [1, 2]]}),
        ["int-nonmonotonic-poll"],
        None,
    ),
    "near-int-nonmonotonic-poll-two-keys": (
        send(0, 0, 1, "ok", 0)
        + send(0, 0, 2, "ok", 1)
        + send(0, 1, 3, "ok", 0)
        + assign(1, [0, 1])
        + poll(1, {0: [[0, 1], [1, 2]], 1: [[0, 3]]})
        + drain({0: [[0, 1], [1, 2]], 1: [[0, 3]]}),
        [],
        None,
    ),
    "nonmonotonic-send": (
        send(0, 0, 1, "ok", 1) + send(0, 0, 2, "ok", 0) + drain({0: [[0, 2], [1, 1]]}),
        ["G0-realtime", "nonmonotonic-send"],  # acknowledged at 1, then a later send at 0: not bad alone
        None,
    ),
    "near-nonmonotonic-send-reassigned": (  # the key left the producer's assignment in between
        send(0, 0, 1, "ok", 1) + assign(0, [1]) + send(0, 0, 2, "ok", 0) + drain({0: [[0, 2], [1, 1]]}),
        ["G0-realtime"],
        None,
    ),
    "near-nonmonotonic-send-two-producers": (
        send(0, 0, 1, "ok", 1) + send(1, 0, 2, "ok", 0) + drain({0: [[0, 2], [1, 1]]}),
        ["G0-realtime"],
        None,
    ),
    "int-nonmonotonic-send": (
        sends_op(0, [(0, 1, 1), (0, 0, 2)]) + drain({0: [[0, 2], [1, 1]]}),
        ["int-nonmonotonic-send"],
        None,
    ),
    "near-int-nonmonotonic-send-two-keys": (
        send(1, 0, 5, "ok", 0) + sends_op(0, [(0, 1, 1), (1, 0, 2)]) + drain({0: [[0, 5], [1, 1]], 1: [[0, 2]]}),
        [],
        None,
    ),
    "int-send-skip": (
        sends_op(0, [(0, 0, 1), (0, 2, 2)]) + send(1, 0, 3, "ok", 1) + drain({0: [[0, 1], [1, 3], [2, 2]]}),
        ["G0", "int-send-skip"],  # the other producer's send sits between, so each op is before the other
        None,
    ),
    "near-int-send-skip": (sends_op(0, [(0, 0, 1), (0, 1, 2)]) + drain({0: [[0, 1], [1, 2]]}), [], None),
    # the cycle checks' near misses (their cases are Jepsen's: jepsen-g0, jepsen-g1c-*, jepsen-precommitted-read,
    # jepsen-empty-history; G0-realtime in nonmonotonic-send; G1c-realtime below)
    "near-G0-same-order": (  # two producers' sends to two keys, in the same order on both
        [(0, "invoke", S, [[S, 0, 1], [S, 1, 2]]), (1, "invoke", S, [[S, 0, 3], [S, 1, 4]]),
         (0, "ok", S, [[S, 0, [0, 1]], [S, 1, [0, 2]]]), (1, "ok", S, [[S, 0, [1, 3]], [S, 1, [1, 4]]])]
        + drain({0: [[0, 1], [1, 3]], 1: [[0, 2], [1, 4]]}),
        [],
        None,
    ),
    "near-G0-realtime-in-order": (send(0, 0, 1, "ok", 0) + send(1, 0, 2, "ok", 1) + drain({0: [[0, 1], [1, 2]]}),
                                  [], None),
    "near-G1c-one-way": (  # t2 read t1's send, t1 read nothing of t2's
        [(0, "invoke", "txn", [[S, 0, 1], [P]]), (0, "ok", "txn", [[S, 0, [0, 1]], [P, {}]]),
         (1, "invoke", "txn", [[S, 1, 2], [P]]), (1, "ok", "txn", [[S, 1, [0, 2]], [P, {"0": [[0, 1]]}]])]
        + drain({0: [[0, 1]], 1: [[0, 2]]}),
        [],
        None,
    ),
    "G1c-realtime": (  # a poll read a value whose send was invoked only after the poll completed
        assign(1, [0]) + poll(1, {0: [[0, 5]]}) + send(0, 0, 5, "ok", 0) + drain({0: [[0, 5]]}),
        ["G1c-realtime"],
        None,
    ),
    "near-G1c-realtime-concurrent": (  # the send was in flight while the poll ran
        assign(1, [0]) + [(0, "invoke", S, [[S, 0, 5]])] + poll(1, {0: [[0, 5]]}) + [(0, "ok", S, [[S, 0, [0, 5]]])]
        + drain({0: [[0, 5]]}),
        [],
        None,
    ),
    "near-precommitted-read": (  # a transaction read another's send, not its own
        [(0, "invoke", "txn", [[S, 0, 1]]), (0, "ok", "txn", [[S, 0, [0, 1]]]),
         (1, "invoke", "txn", [[S, 1, 2], [P]]), (1, "ok", "txn", [[S, 1, [0, 2]], [P, {"0": [[0, 1]]}]])]
        + drain({0: [[0, 1]], 1: [[0, 2]]}),
        [],
        None,
    ),
    "near-empty-transaction-graph-one-send": (send(0, 0, 1, "ok", 0), ["unseen"], None),  # Jepsen: empty graph
    "divergent-replicas": (
        send(0, 0, 1, "ok", 0) + drain({0: [[0, 1]]}),
        ["divergent-replicas", "inconsistent-offsets"],
        None,
    ),
    "near-divergent-replicas-uncommitted-tail": (send(0, 0, 1, "ok", 0) + drain({0: [[0, 1]]}), [], None),
}

#: consume-transform-produce (results/exactly_once.py): input key 0, output key 1; values 1, 2, 3 at
#: input offsets 0, 1, 2; an output's value is 100 * (process) + its input's value
CTP = {"seed": 1, "config": {"sub_via": ["subscribe"], "txn_mode": "ctp"}, "complete": True}
IN = send(0, 0, 1, "ok", 0) + send(0, 0, 2, "ok", 1) + send(0, 0, 3, "ok", 2)


def ctp(p: int, reads: list[list[int]], outs: list[tuple[int, int | None, int]], offset: int,
        outcome: str = "ok", fenced: bool = False) -> list[tuple[Any, ...]]:
    """One ctp transaction of process p: it polled `reads` of input key 0 ([offset, value] each), sent
    each (input offset, output offset, output value) of `outs` to output key 1, and added the group's
    offset `offset` of key 0; it ended `outcome`."""
    value: list[Any] = [[P, {"0": reads}]]
    value += [[S, 1, [o, v]] if outcome == "ok" and o is not None else [S, 1, v] for _, o, v in outs]
    done: dict[str, Any] = {"ctp": True, "sources": [[0, i] for i, _, _ in outs], "offsets": {"0": offset}}
    if outcome == "ok":
        done["commits"] = {"0": offset}
    if fenced:
        done["fenced"] = True
    return [(p, "invoke", "txn", [[P]], False, {"ctp": True}), (p, outcome, "txn", value, False, done)]


def ctp_drain(outputs: list[list[int]], group: int) -> list[tuple[Any, ...]]:
    """The final drain: the input key whole, the output key's `outputs`, and the group's offset."""
    reads = {"0": [[0, 1], [1, 2], [2, 3]], "1": outputs}
    return assign(90, [0, 1]) + [(90, "invoke", P, [[P]], True),
                                 (90, "ok", P, [[P, reads]], True, {"group-offsets": {"0": group}})]


CTP_CASES: dict[str, tuple[list[tuple[Any, ...]], list[str], dict[str, Any] | None]] = {
    # process 1 processed input 0 and was fenced before its commit; its successor 2 processed inputs 0-2;
    # the zombie's output 101 stayed invisible
    "near-ctp-processed-twice-aborted": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1]], [(0, None, 101)], 1, "fail", fenced=True)
        + assign(2, [0], "subscribe") + ctp(2, [[0, 1], [1, 2], [2, 3]], [(0, 2, 201), (1, 3, 202), (2, 4, 203)], 3)
        + ctp_drain([[2, 201], [3, 202], [4, 203]], 3),
        [],
        CTP,
    ),
    # the same, but the zombie's commit went through after its successor had started from offset 0:
    # input 0's output is there twice
    "ctp-processed-twice": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1]], [(0, 0, 101)], 1)
        + assign(2, [0], "subscribe") + ctp(2, [[0, 1], [1, 2], [2, 3]], [(0, 2, 201), (1, 3, 202), (2, 4, 203)], 3)
        + ctp_drain([[0, 101], [2, 201], [3, 202], [4, 203]], 3),
        ["ctp-processed-twice"],
        CTP,
    ),
    # the fenced zombie's output is visible: an aborted read, and the successor's output of the same
    # input makes it twice
    "ctp-fenced-write-visible": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1]], [(0, 0, 101)], 1, "fail", fenced=True)
        + assign(2, [0], "subscribe") + ctp(2, [[0, 1], [1, 2], [2, 3]], [(0, 2, 201), (1, 3, 202), (2, 4, 203)], 3)
        + ctp_drain([[0, 101], [2, 201], [3, 202], [4, 203]], 3),
        ["G1a", "ctp-fenced-write-visible", "ctp-processed-twice"],
        CTP,
    ),
    # process 1's transaction over inputs 0 and 1 aborted; its successor started at offset 0 again
    "near-ctp-skipped-input": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1], [1, 2]], [(0, None, 101), (1, None, 102)], 2, "fail")
        + assign(2, [0], "subscribe") + ctp(2, [[0, 1], [1, 2], [2, 3]], [(0, 0, 201), (1, 1, 202), (2, 2, 203)], 3)
        + ctp_drain([[0, 201], [1, 202], [2, 203]], 3),
        [],
        CTP,
    ),
    # the same abort, but its offsets were made the group's: the successor started at offset 2, and
    # inputs 0 and 1 are consumed with no output
    "ctp-skipped-input": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1], [1, 2]], [(0, None, 101), (1, None, 102)], 2, "fail")
        + assign(2, [0], "subscribe") + ctp(2, [[2, 3]], [(2, 0, 203)], 3)
        + ctp_drain([[0, 203]], 3),
        ["ctp-skipped-input"],
        CTP,
    ),
    # input 0 committed; the transaction over input 1 aborted and, after the rewind, committed again
    "near-ctp-offsets-beyond-commit": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1]], [(0, 0, 101)], 1)
        + ctp(1, [[1, 2]], [(1, None, 102)], 2, "fail") + ctp(1, [[1, 2]], [(1, 2, 112)], 2)
        + ctp_drain([[0, 101], [2, 112]], 2),
        [],
        CTP,
    ),
    # the aborted transaction's offset 2 is the group's at the end, and input 1 has no output
    "ctp-offsets-beyond-commit": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1]], [(0, 0, 101)], 1)
        + ctp(1, [[1, 2]], [(1, None, 102)], 2, "fail")
        + ctp_drain([[0, 101]], 2),
        ["ctp-offsets-beyond-commit", "ctp-skipped-input"],
        CTP,
    ),
    "near-ctp-offsets-behind-commit": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1]], [(0, 0, 101)], 1) + ctp(1, [[1, 2]], [(1, 2, 102)], 2)
        + ctp_drain([[0, 101], [2, 102]], 2),
        [],
        CTP,
    ),
    # both transactions committed, and the group's offset is the first one's: the second's commit lost
    "ctp-offsets-behind-commit": (
        IN + assign(1, [0], "subscribe") + ctp(1, [[0, 1]], [(0, 0, 101)], 1) + ctp(1, [[1, 2]], [(1, 2, 102)], 2)
        + ctp_drain([[0, 101], [2, 102]], 1),
        ["ctp-offsets-behind-commit"],
        CTP,
    ),
}
CASES.update(CTP_CASES)

REPLICAS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "divergent-replicas": {
        "n1": [
            {"topic": "chaos", "partition": 0, "hw": 1, "leo": 1},
            {"offset": 0, "epoch": 0, "value": "1", "crc": 1},
        ],
        "n2": [
            {"topic": "chaos", "partition": 0, "hw": 1, "leo": 1},
            {"offset": 0, "epoch": 1, "value": "7", "crc": 2},
        ],
    },
    "near-divergent-replicas-uncommitted-tail": {
        "n1": [
            {"topic": "chaos", "partition": 0, "hw": 1, "leo": 2},
            {"offset": 0, "epoch": 0, "value": "1", "crc": 1},
            {"offset": 1, "epoch": 0, "value": "8", "crc": 3},
        ],
        "n2": [
            {"topic": "chaos", "partition": 0, "hw": 1, "leo": 2},
            {"offset": 0, "epoch": 0, "value": "1", "crc": 1},
            {"offset": 1, "epoch": 1, "value": "9", "crc": 4},
        ],
    },
}


def render(ops: list[tuple[Any, ...]]) -> str:
    lines = []
    for i, op in enumerate(ops):
        d: dict[str, Any] = {
            "index": i,
            "time": 1_000_000 * (i + 1),
            "process": op[0],
            "type": op[1],
            "f": op[2],
            "value": op[3],
        }
        if len(op) > 4 and op[4]:
            d["final"] = True
        if len(op) > 5:
            d.update(op[5])
        lines.append(json.dumps(d, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def main() -> None:
    from tests.checks.jepsen_corpus import CASES as JEPSEN
    from tests.checks.jepsen_corpus import WW_DEPS

    if OUT.exists():
        shutil.rmtree(OUT)
    for name, (ops, expected, test_json, asserts) in JEPSEN.items():
        d = OUT / f"jepsen-{name}"
        d.mkdir(parents=True)
        (d / "history.jsonl").write_text(render(ops))
        (d / "expected.json").write_text(json.dumps(sorted(expected)) + "\n")
        (d / "jepsen.json").write_text(json.dumps({"asserts": asserts, "ww_deps": name in WW_DEPS}) + "\n")
        if test_json is not None:
            (d / "test.json").write_text(json.dumps(test_json) + "\n")
    for name, (ops, expected, test_json) in CASES.items():
        d = OUT / name
        d.mkdir(parents=True)
        (d / "history.jsonl").write_text(render(ops))
        (d / "expected.json").write_text(json.dumps(sorted(expected)) + "\n")
        if test_json is not None:
            (d / "test.json").write_text(json.dumps(test_json) + "\n")
        for node, lines in REPLICAS.get(name, {}).items():
            (d / "replicas" / node).mkdir(parents=True)
            (d / "replicas" / node / "chaos-0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


if __name__ == "__main__":
    main()
