"""elle-cli export against a golden file in elle-cli's documented list-append JSON form; the real
elle-cli when installed (a real run, a planted G1a and planted divergent prefixes, a crash and a
time-out, one JVM per batch; a G1c cycle that our own search finds and elle's one-micro-op view does
not judge); the performance facts a plot reads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from results.check import CheckResult, check_run, check_runs
from results.elle import export_list_append, parse_verbose, run_elle, run_elle_batch

HERE = Path(__file__).resolve().parent
GOLDEN_HISTORY = HERE / "corpus" / "valid-basic" / "history.jsonl"
GOLDEN = HERE / "golden" / "valid-basic.elle.json"
REAL_RUN = HERE.parent / "results" / "fixtures" / "valid-kill-controller"


def test_export_matches_golden_file() -> None:
    """Sends are appends; a poll from offset 0 is a read of the prefix, its invoke reads `null`."""
    got = export_list_append(GOLDEN_HISTORY)
    assert got == json.loads(GOLDEN.read_text())
    for op in got:
        assert set(op) == {"index", "type", "f", "process", "value"}
        for m in op["value"]:
            assert m[0] in ("append", "r") and isinstance(m[1], int)
            if m[0] == "r":
                assert (m[2] is None) == (op["type"] == "invoke")
    assert [op["index"] for op in got] == list(range(len(got)))


def test_elle_verbose_output_is_read_per_file_by_valid_alone() -> None:
    text = '{"valid?":true}\n{"valid?":false,\n "anomaly-types":["G1a"]}\n' \
           '{"valid?":"unknown",\n "anomaly-types":["empty-transaction-graph"]}\n'
    got = parse_verbose(text)
    assert [r.status for r in got] == ["valid", "invalid", "unknown"]
    assert "G1a" in got[1].detail and "empty-transaction-graph" in got[2].detail
    assert parse_verbose("Exception in thread main") == []


def test_without_elle_cli_the_check_is_skipped_never_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ELLE_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-elle-here"))
    r = run_elle(GOLDEN_HISTORY, tmp_path)
    assert r.status == "skipped" and r.status != "valid"
    monkeypatch.setenv("ELLE_CLI", "/nonexistent/elle-cli")
    assert run_elle(GOLDEN_HISTORY, tmp_path, "").status == "skipped"  # an empty --elle-cli turns it off
    missing = run_elle(GOLDEN_HISTORY, tmp_path)
    assert missing.status == "unknown" and "does not exist" in missing.detail


def _cycle_history(path: Path) -> Path:
    """Two transactions that each read the other's send: a G1c cycle (our own search finds it)."""
    ops = [
        (0, "invoke", [["send", 0, 1], ["poll"]]),
        (1, "invoke", [["send", 1, 2], ["poll"]]),
        (0, "ok", [["send", 0, [0, 1]], ["poll", {"1": [[0, 2]]}]]),
        (1, "ok", [["send", 1, [0, 2]], ["poll", {"0": [[0, 1]]}]]),
    ]
    path.write_text("".join(json.dumps({"index": i, "time": i + 1, "process": p, "type": t, "f": "txn", "value": v})
                            + "\n" for i, (p, t, v) in enumerate(ops)))
    return path


def _counting(tmp_path: Path, target: str, env: str = "") -> tuple[str, Path]:
    """A launcher that logs each start of `target` (so a test can count JVM starts)."""
    log = tmp_path / "starts.log"
    script = tmp_path / "elle-counting"
    script.write_text(f'#!/bin/sh\necho start >> "{log}"\n{env} exec "{target}" "$@"\n')
    script.chmod(0o755)
    return str(script), log


def _divergent_history(path: Path) -> Path:
    """Two polls from offset 0 that disagree about the key's second record: prefixes no one list has."""
    ops = [
        (0, "invoke", "send", [["send", 0, 1], ["send", 0, 2], ["send", 0, 3]]),
        (0, "ok", "send", [["send", 0, [0, 1]], ["send", 0, [1, 2]], ["send", 0, [2, 3]]]),
        (1, "invoke", "poll", [["poll"]]), (1, "ok", "poll", [["poll", {"0": [[0, 1], [1, 2]]}]]),
        (2, "invoke", "poll", [["poll"]]), (2, "ok", "poll", [["poll", {"0": [[0, 1], [1, 3]]}]]),
    ]
    path.write_text("".join(json.dumps({"index": i, "time": i + 1, "process": p, "type": t, "f": f, "value": v})
                            + "\n" for i, (p, t, f, v) in enumerate(ops)))
    return path


def test_real_elle_cli_judges_a_batch_in_one_jvm(elle_cli: str, tmp_path: Path) -> None:
    """A real run's export is valid, a planted G1a and planted divergent prefixes are invalid; a G1c
    cycle across two keys is not elle's to judge in our export (one micro-op per transaction: Kafka
    does not isolate writes, which elle's list-append model would call G0): four histories, one
    elle-cli process."""
    cmd, log = _counting(tmp_path, elle_cli)
    runs = []
    for name, history in [("real", REAL_RUN / "history.jsonl"), ("g1a", HERE / "corpus" / "G1a" / "history.jsonl"),
                          ("prefix", _divergent_history(tmp_path / "prefix.jsonl")),
                          ("cycle", _cycle_history(tmp_path / "cycle.jsonl"))]:
        (tmp_path / name).mkdir()
        runs.append((history, tmp_path / name))
    got = run_elle_batch(runs, cmd)
    assert [r.status for r in got] == ["valid", "invalid", "invalid", "valid"], [r.output[-500:] for r in got]
    assert "G1a" in got[1].detail and "incompatible-order" in got[2].detail
    assert log.read_text().count("start") == 1
    assert (tmp_path / "real" / "history.elle.json").is_file()


def test_real_elle_cli_crash_and_time_out_are_unknown_with_the_reason(elle_cli: str, tmp_path: Path) -> None:
    crashing, _ = _counting(tmp_path, elle_cli, env="JAVA_OPTS=-Xmx1k")  # the JVM refuses to start
    r = run_elle_batch([(GOLDEN_HISTORY, None), (GOLDEN_HISTORY, None)], crashing)
    assert [x.status for x in r] == ["unknown", "unknown"]
    assert "elle-cli failed on this history" in r[0].detail and "heap" in r[0].output.lower()
    slow = run_elle_batch([(GOLDEN_HISTORY, None)], elle_cli, timeout_s=0.2)
    assert slow[0].status == "unknown" and "did not finish within" in slow[0].detail


@pytest.mark.spark
def test_check_with_real_elle_cli_folds_its_verdict_in(spark: Any, elle_cli: str, tmp_path: Path) -> None:
    """`check_runs` with elle-cli: divergent prefixes are invalid in both (ours: inconsistent-offsets,
    elle's: incompatible-order), the G1c cycle is ours alone (elle's view: valid), the real run
    stays valid in both."""
    cyc, prefix, real = tmp_path / "cycle", tmp_path / "prefix", tmp_path / "real"
    for d in (cyc, prefix):
        d.mkdir()
    _cycle_history(cyc / "history.jsonl")
    _divergent_history(prefix / "history.jsonl")
    shutil.copytree(REAL_RUN, real)
    a, p, b = check_runs([cyc, prefix, real], spark_master="local[2]", perf=False, elle_cli=elle_cli)
    assert isinstance(a, CheckResult) and isinstance(p, CheckResult) and isinstance(b, CheckResult)
    assert a.bad_error_types == ["G1c"] and a.elle["status"] == "valid" and a.valid is False
    assert p.elle["status"] == "invalid" and "inconsistent-offsets" in p.bad_error_types and p.valid is False
    assert b.elle["status"] == "valid" and b.valid is True, b.to_json()


@pytest.mark.spark
def test_perf_facts_from_a_history_with_a_fault_window(spark: Any, tmp_path: Path) -> None:
    import pandas as pd

    run = tmp_path / "run"
    shutil.copytree(HERE / "corpus" / "valid-basic", run)
    lines = (run / "history.jsonl").read_text().splitlines()
    ops = [json.loads(x) for x in lines]
    n = len(ops)
    start = {
        "index": n,
        "time": ops[3]["time"] + 1,
        "process": "nemesis",
        "type": "info",
        "f": "start-partition",
        "value": {"n1": ["n2"]},
    }
    # renumber: insert the nemesis ops in time order, after op 3 and after op 5
    stop = {
        "index": n + 1,
        "time": ops[5]["time"] + 1,
        "process": "nemesis",
        "type": "info",
        "f": "stop-partition",
        "value": None,
    }
    merged = sorted([*ops, start, stop], key=lambda d: d["time"])
    for i, d in enumerate(merged):
        d["index"] = i
    (run / "history.jsonl").write_text("".join(json.dumps(d) + "\n" for d in merged))
    r = check_run(run, spark_master="local[2]")
    assert r.valid is True
    lat = pd.read_parquet(run / "perf" / "latency.parquet")
    assert len(lat) == sum(1 for d in ops if d["type"] != "invoke") and (lat["latency_ms"] > 0).all()
    avail = pd.read_parquet(run / "perf" / "availability.parquet")
    assert avail["availability"].between(0, 1).all()
    faults = json.loads((run / "perf" / "faults.json").read_text())
    assert len(faults) == 1 and faults[0]["family"] == "partition"
    assert faults[0]["recovery_s"] is not None and faults[0]["recovery_s"] > 0
    assert r.perf["fault_windows"] == 1


@pytest.mark.spark
def test_perf_facts_of_many_runs_in_one_job_stay_with_their_run(spark: Any, tmp_path: Path) -> None:
    import pandas as pd

    runs = []
    for case in ("valid-basic", "lost-write", "poll-skip"):
        shutil.copytree(HERE / "corpus" / case, tmp_path / case)
        runs.append(tmp_path / case)
    got = check_runs(runs, spark_master="local[2]", elle_cli="")
    for run, r in zip(runs, got, strict=True):
        assert isinstance(r, CheckResult)
        lines = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
        lat = pd.read_parquet(run / "perf" / "latency.parquet")
        assert len(lat) == sum(1 for d in lines if d["type"] != "invoke"), run.name
        assert sorted(lat["time_s"] * 1e9) == pytest.approx(sorted(d["time"] for d in lines if d["type"] != "invoke"))
        assert r.perf["fault_windows"] == 0 and r.timings["runs_in_job"] == 3


def test_elle_cli_is_found_as_a_user_installs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--elle-cli first, then $ELLE_CLI, then elle-cli on PATH; when none, one sentence says what will not
    be looked for (and nothing when it was turned off on purpose); a value that is no command line is
    the user's mistake (exit 3) or this machine's (exit 6), never a crash."""
    from kernel.errors import EnvironmentProblem, UsageError
    from results.elle import absent_note, elle_command

    on_path = tmp_path / "bin" / "elle-cli"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\nexit 0\n")
    on_path.chmod(0o755)
    monkeypatch.delenv("ELLE_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert elle_command(None) is None
    note = absent_note(None)
    assert note is not None and "elle-cli not found" in note and "will not run" in note and "G1a" in note
    assert absent_note("") is None and elle_command("") is None
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert elle_command(None) == [str(on_path)] and absent_note(None) is None
    monkeypatch.setenv("ELLE_CLI", "/opt/elle/elle-cli --flag")
    assert elle_command(None) == ["/opt/elle/elle-cli", "--flag"]
    assert elle_command("/x/elle.jar") == ["java", "-jar", "/x/elle.jar"]
    with pytest.raises(UsageError, match="--elle-cli '\"oops' is not a command line"):
        elle_command('"oops')
    monkeypatch.setenv("ELLE_CLI", '"oops')
    with pytest.raises(EnvironmentProblem, match="ELLE_CLI="):
        elle_command(None)
