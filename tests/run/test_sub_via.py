"""`--sub-via`: the setting, how workers split between assign and subscribe, the subscribe op stream,
and the check that a group's acknowledged commits never go backwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel.errors import UsageError
from kernel.history import Op, OpType
from kernel.spec import RunSpec, build_spec
from results.commits import commit_regressions
from workloads.queue import REJOIN_FRACTION, QueueGenerator, group_id, sub_via_of


def test_sub_via_parses_saves_and_refuses_what_is_not_a_mode() -> None:
    assert RunSpec().sub_via == ("assign",)
    s = build_spec({"sub_via": "assign,subscribe", "seed": 3})
    assert s.sub_via == ("assign", "subscribe")
    assert s.to_json()["sub_via"] == ["assign", "subscribe"]
    assert RunSpec.from_json(s.to_json()) == s
    assert build_spec({"sub_via": ["subscribe"]}).sub_via == ("subscribe",)
    for bad in ("poll", "", "assign,assign", ["subscribe", 1]):
        with pytest.raises(UsageError, match="sub-via"):
            build_spec({"sub_via": bad})


def test_both_modes_split_the_workers_by_the_seed() -> None:
    for seed in range(20):
        spec = build_spec({"sub_via": "assign,subscribe", "seed": seed, "concurrency": 8})
        modes = [sub_via_of(spec, w) for w in range(8)]
        assert modes.count("subscribe") == 4 and modes.count("assign") == 4
    one = build_spec({"sub_via": "subscribe", "seed": 5})
    assert {sub_via_of(one, w) for w in range(8)} == {"subscribe"}
    firsts = {sub_via_of(build_spec({"sub_via": "assign,subscribe", "seed": s}), 0) for s in range(20)}
    assert firsts == {"assign", "subscribe"}  # the seed decides which worker gets which mode


def _stream(spec: RunSpec, worker: int, n: int, info_at: int | None = None) -> list[tuple[str, Any, dict]]:
    from kernel.workload import Completion

    g = QueueGenerator(spec, worker)
    out = []
    for i in range(n):
        inv = g.next()
        out.append((inv.f, inv.value, dict(inv.extra)))
        g.update(inv, Completion(OpType.INFO if i == info_at else OpType.OK, inv.value))
    return out


def test_a_subscribing_worker_subscribes_to_every_key_then_sends_polls_and_sometimes_rejoins() -> None:
    spec = build_spec({"sub_via": "subscribe", "seed": 11, "partitions": 4})
    ops = _stream(spec, 0, 3000)
    assert ops[0] == ("subscribe", [0, 1, 2, 3], {})
    fs = [f for f, _, _ in ops[1:]]
    assert "assign" not in fs and set(fs) == {"send", "poll", "subscribe"}
    rejoins = [x for x in ops[1:] if x[0] == "subscribe"]
    assert all(v == [0, 1, 2, 3] and e == {"rejoin": True} for _, v, e in rejoins)
    assert 0.5 * REJOIN_FRACTION < len(rejoins) / len(ops) < 2 * REJOIN_FRACTION
    # after an info the worker is a fresh process: its next op subscribes (without leaving first)
    after = _stream(spec, 0, 12, info_at=5)
    assert after[6] == ("subscribe", [0, 1, 2, 3], {})
    assert after[:6] == ops[:6]


def test_an_assigning_worker_is_unchanged_by_the_setting() -> None:
    a = build_spec({"seed": 9})
    both = build_spec({"seed": 9, "sub_via": "assign,subscribe"})
    w = next(w for w in range(8) if sub_via_of(both, w) == "assign")
    assert _stream(a, w, 500) == _stream(both, w, 500)
    assert group_id(a) == "chaos-queue-9"


def _poll(index: int, process: int, commits: dict[str, int], span: int = 1) -> list[Op]:
    return [Op(index, index, process, OpType.INVOKE, "poll", [["poll"]]),
            Op(index + span, index + span, process, OpType.OK, "poll", [["poll", {}]], {"commits": commits})]


def test_commit_regressions_are_commits_below_one_acknowledged_before_they_began() -> None:
    fine = _poll(0, 1, {"0": 10, "1": 4}) + _poll(2, 2, {"0": 12}) + _poll(4, 1, {"1": 4})
    assert commit_regressions(fine) == []
    # a commit of 7 that began after 12 was acknowledged: key 0 went backwards
    bad = fine + _poll(6, 3, {"0": 7, "1": 5})
    (r,) = commit_regressions(bad)
    assert r.to_json() == {"key": 0, "committed": 12, "then": 7, "committed-at": 3, "then-invoked-at": 6,
                           "processes": [2, 3]}
    # concurrent commits are not ordered: 20 acknowledged while 15 was in flight is no regression
    overlapping = _poll(0, 1, {"0": 15}, span=5) + _poll(1, 2, {"0": 20}, span=1)
    assert commit_regressions(sorted(overlapping, key=lambda o: o.index)) == []
    # refused commits and fail/info ops carry nothing acknowledged
    failed = [Op(8, 8, 4, OpType.INVOKE, "poll", [["poll"]]),
              Op(9, 9, 4, OpType.OK, "poll", [["poll", {}]], {"commit-error": "REBALANCE_IN_PROGRESS"}),
              Op(10, 10, 5, OpType.INVOKE, "poll", [["poll"]]),
              Op(11, 11, 5, OpType.INFO, "poll", [["poll"]], {"commits": {"0": 1}})]
    assert commit_regressions(fine + failed) == []


def test_the_commit_check_reads_a_stored_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from results.commits import main

    ops = _poll(0, 1, {"2": 30}) + _poll(2, 2, {"2": 29})
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o.to_json()) + "\n" for o in ops))
    assert main([str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[0])["type"] == "commit-regression"
    assert json.loads(out[0])["key"] == 2
    assert out[-1] == ("2 acknowledged commits, 1 regressions, 0 rereads of committed offsets, "
                       "0 fetched below an acknowledged commit")
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o.to_json()) + "\n" for o in ops[:2]))
    assert main([str(tmp_path / "history.jsonl")]) == 0


def _op(index: int, process: int, typ: OpType, f: str, value: Any = None, **extra: Any) -> Op:
    return Op(index, index, process, typ, f, value if value is not None else [["poll"]], extra)


def test_a_consumer_that_starts_below_an_acknowledged_commit_rereads_committed_data() -> None:
    from results.commits import committed_rereads

    ok = OpType.OK
    history = [
        _op(0, 1, OpType.INVOKE, "poll"),
        _op(1, 1, ok, "poll", [["poll", {"0": [[10, 1], [11, 2]]}]], commits={"0": 12}),
        # process 2 is given key 0 in a poll invoked after 12 was acknowledged: it starts at 12
        _op(2, 2, OpType.INVOKE, "poll"),
        _op(3, 2, ok, "poll", [["poll", {"0": [[12, 3]]}]], **{"rebalance-log": [{"revoked": [], "assigned": [0]}]},
            commits={"0": 13}),
        # process 3 too, but it starts at 11: the group lost the commit of 13
        _op(4, 3, OpType.INVOKE, "poll"),
        _op(5, 3, ok, "poll", [["poll", {}]], **{"rebalance-log": [{"revoked": [], "assigned": [0]}]}),
        _op(6, 3, OpType.INVOKE, "poll"),
        _op(7, 3, ok, "poll", [["poll", {"0": [[11, 2], [12, 3], [13, 4]]}]], commits={"0": 14}),
    ]
    (r,) = committed_rereads(history)
    assert r.to_json() == {"key": 0, "process": 3, "index": 7, "first-read": 11, "committed": 13, "committed-at": 3}
    assert commit_regressions(history) == []  # it read on and committed higher: no regression shows it
    # a commit acknowledged while the assigning poll was in flight does not bind it (concurrent)
    concurrent = [history[0], _op(1, 2, OpType.INVOKE, "poll"), history[1],
                  _op(3, 2, ok, "poll", [["poll", {"0": [[10, 1]]}]], **{"rebalance-log": [{"revoked": [],
                                                                                         "assigned": [0]}]})]
    assert committed_rereads(concurrent) == []
    # the key revoked before it was read, or the consumer replaced (subscribe): nothing is owed
    revoked = history[:6] + [_op(6, 3, OpType.INVOKE, "poll"),
                             _op(7, 3, ok, "poll", [["poll", {"0": [[11, 2]]}]],
                                 **{"rebalance-log": [{"revoked": [0], "assigned": [1]}]})]
    assert committed_rereads(revoked) == []
    rejoined = history[:6] + [_op(6, 3, OpType.INVOKE, "subscribe", [0]), _op(7, 3, ok, "subscribe", [0]),
                              _op(8, 3, OpType.INVOKE, "poll"), _op(9, 3, ok, "poll", [["poll", {"0": [[11, 2]]}]])]
    assert committed_rereads(rejoined) == []


def test_a_committed_offset_fetched_below_an_acknowledged_commit_is_a_lost_commit() -> None:
    """The owner of key 0 commits 12; its next poll asks the coordinator and hears 10: the commit
    was acknowledged and then lost (no rebalance needed to see it). A fetch by a poll invoked before
    the commit was acknowledged owes it nothing; a missing key (never committed) says nothing."""
    from results.commits import commit_anomalies, lost_commits

    ok = OpType.OK
    history = [
        _op(0, 1, OpType.INVOKE, "poll"),
        _op(1, 2, OpType.INVOKE, "poll"),  # concurrent with the commit of 12
        _op(2, 1, ok, "poll", [["poll", {"0": [[10, 1], [11, 2]]}]], commits={"0": 12}),
        _op(3, 2, ok, "poll", [["poll", {}]], **{"fetched-commits": {"0": 10}}),
        _op(4, 1, OpType.INVOKE, "poll"),
        _op(5, 1, ok, "poll", [["poll", {}]], **{"fetched-commits": {"0": 10}}),
        _op(6, 1, OpType.INVOKE, "poll"),
        _op(7, 1, OpType.INFO, "poll", [["poll"]], **{"fetched-commits": {"0": 12, "1": 3}}),
    ]
    (lost,) = lost_commits(history)
    assert lost.to_json() == {"key": 0, "process": 1, "index": 5, "fetched": 10, "committed": 12, "committed-at": 2}
    assert commit_anomalies(history, 8)["lost-commit"]["count"] == 1
    assert "lost-commit" not in commit_anomalies(history[:4] + history[6:], 8)


@pytest.mark.spark
def test_chaos_check_judges_a_subscribing_groups_commits(tmp_path: Path) -> None:
    """The commit checks are part of the verdict of a run whose consumers subscribe: a consumer that
    starts below an acknowledged commit makes the run invalid, with `reread-committed` as the reason;
    the same history from an assign-only run has no commits to judge."""
    import json

    from results.check import check_run

    ok = OpType.OK
    sends = [_op(0, 0, OpType.INVOKE, "send", [["send", 0, v] for v in (1, 2, 3, 4)]),
             _op(1, 0, ok, "send", [["send", 0, [o, o + 1]] for o in range(4)])]
    history = [*sends]
    for p in (1, 2, 3):
        n = len(history)
        history += [_op(n, p, OpType.INVOKE, "subscribe", [0]), _op(n + 1, p, ok, "subscribe", [0])]
    steps = [(1, [[0, 1], [1, 2]], {"0": 2}, [0]),       # process 1 reads offsets 0-1 and commits 2
             (1, [], {}, None),
             (2, [[2, 3]], {"0": 3}, [0]),                # process 2 takes the key over at 2: right
             (3, [[1, 2], [2, 3], [3, 4]], {"0": 4}, [0])]  # process 3 takes it at 1, below the commit of 3
    for p, recs, commits, assigned in steps:
        extra: dict[str, Any] = {"commits": commits} if commits else {}
        if assigned is not None:
            extra["rebalance-log"] = [{"revoked": [], "assigned": assigned}]
        history += [_op(len(history), p, OpType.INVOKE, "poll"),
                    _op(len(history) + 1, p, ok, "poll", [["poll", {"0": recs} if recs else {}]], **extra)]
    lines = "".join(json.dumps(o.to_json()) + "\n" for o in history)
    for mode, valid in (("subscribe", False), ("assign", True)):
        run = tmp_path / mode
        run.mkdir()
        (run / "history.jsonl").write_text(lines)
        (run / "test.json").write_text(json.dumps({"config": {"sub_via": [mode]}, "complete": True}))
        r = check_run(run, perf=False)
        assert r.valid is valid, (mode, r.anomalies, r.warnings)
        if mode == "subscribe":
            assert r.bad_error_types == ["reread-committed"]
            assert r.anomalies["reread-committed"]["examples"][0]["first-read"] == 1
        else:
            assert "reread-committed" not in r.anomalies
