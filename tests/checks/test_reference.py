"""The plain-Python reference (`results.reference`, the benchmark's baseline) finds, on every corpus
history, the anomaly types the Spark checker is expected to report (`expected.json`), except what it
leaves out by design. No Spark here: this file never starts a session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from results.bench import generate
from results.exactly_once import NAMES as CTP_NAMES
from results.reference import anomalies

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
#: case -> (expected types the reference cannot see, why): only what it leaves out on purpose
LEFT_OUT: dict[str, tuple[set[str], str]] = {
    "divergent-replicas": ({"divergent-replicas", "inconsistent-offsets"},
                           "both come from the replica dumps (replicas/), which the reference does not read; "
                           "the history itself is consistent"),
    "hanging-transaction": ({"hanging-transaction"},
                            "measured by the harness and read from test.json, which the reference (a history "
                            "checker) does not read; the history itself is clean"),
    # the exactly-once check is a pass of its own beside the Spark checks (results/exactly_once.py), as
    # the commit checks are; the reference stands for the Spark checks alone
    **{case: (set(CTP_NAMES) & set(json.loads((CORPUS / case / "expected.json").read_text())),
              "the exactly-once check is a pass beside the Spark checks, which the reference stands for")
       for case in CASES if "ctp" in case},
}


@pytest.mark.parametrize("case", CASES)
def test_reference_agrees_with_the_corpus(case: str) -> None:
    expected = set(json.loads((CORPUS / case / "expected.json").read_text()))
    missing, why = LEFT_OUT.get(case, (set(), ""))
    assert missing <= expected, f"{case}: LEFT_OUT names types the case does not expect"
    found = anomalies(CORPUS / case / "history.jsonl")
    assert set(found) == expected - missing, (case, found, why)
    assert all(n >= 1 for n in found.values()), found


def test_left_out_cases_exist() -> None:
    assert set(LEFT_OUT) <= set(CASES)


def test_a_generated_correct_log_has_no_anomalies(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    generate(path, 20_000)
    assert anomalies(path) == {}


def test_counts_are_rows_as_the_definitions_say(tmp_path: Path) -> None:
    """Two acknowledged values never read below a read one (two lost writes), and one read value
    nobody sent (one unexpected): counts, not only types."""
    lines = [
        (0, "invoke", "send", [["send", 0, 1]]), (0, "ok", "send", [["send", 0, [0, 1]]]),
        (0, "invoke", "send", [["send", 0, 2]]), (0, "ok", "send", [["send", 0, [1, 2]]]),
        (0, "invoke", "send", [["send", 0, 3]]), (0, "ok", "send", [["send", 0, [2, 3]]]),
        (9, "invoke", "assign", [0]), (9, "ok", "assign", [0]),
        (9, "invoke", "poll", [["poll"]]), (9, "ok", "poll", [["poll", {"0": [[2, 3], [3, 77]]}]]),
    ]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps({"index": i, "time": i, "process": p, "type": t, "f": f, "value": v}) + "\n"
                            for i, (p, t, f, v) in enumerate(lines)))
    assert anomalies(path) == {"lost-write": 2, "unexpected": 1}


def test_a_generated_transactional_log_has_nothing_bad(tmp_path: Path) -> None:
    """Transactions that commit, abort and end unknown over a correct log, read committed: the only
    findings are what Kafka's transactions do normally (interleaved sends: int-send-skip and cycles
    through ww edges), and some of each, so the cycle search has work."""
    from kernel.history import read_ops
    from results.bench import generate_txn
    from results.reference import pass1

    path = tmp_path / "history.jsonl"
    generate_txn(path, 20_000, seed=3)
    found = anomalies(path)
    assert set(found) <= {"int-send-skip", "G0", "G1c", "G0-realtime", "G1c-realtime"}, found
    assert found.get("G0", 0) > 0 and found.get("int-send-skip", 0) > 0
    s = pass1(read_ops(path))
    types = {t.value for *_, t in s.poll_records}
    assert types >= {"ok", "fail"}, "aborted transactions' polls are in the history"
