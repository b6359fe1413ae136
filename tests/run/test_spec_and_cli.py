"""`chaos run` input handling: every bad input is one sentence and a non-zero exit, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.errors import UsageError
from kernel.spec import RunSpec, build_spec, load_toml
from tests.conftest import run_chaos
from workloads.queue import QueueGenerator


@pytest.mark.parametrize(("args", "msg"), [
    (["--workload", "bank"], "unknown workload 'bank'"),
    (["--nemesis", "partition,meteor"], "unknown nemesis 'meteor'"),
    (["--time-limit", "-5"], "time-limit must be between 1 and 86400, not -5"),
    (["--bug", "all-of-them"], "unknown bug switch 'all-of-them'"),
    (["--provisioner", "cloud"], "unknown provisioner 'cloud'"),
])
def test_bad_flags(args: list[str], msg: str, tmp_path: Path) -> None:
    res = run_chaos("run", "--store", str(tmp_path), *args)
    assert res.returncode >= 3, res.stderr
    assert msg in res.stderr and "Traceback" not in res.stderr
    assert not any(tmp_path.iterdir()), "nothing is created before the input is known to be good"


def test_config_file_with_unknown_key(tmp_path: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text('time-limit = 10\nnodes = 3\ncolour = "blue"\n')
    res = run_chaos("run", "--config", str(cfg), "--store", str(tmp_path / "s"))
    assert res.returncode >= 3 and "unknown run setting(s): colour" in res.stderr


def test_toml_then_flags_override(tmp_path: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text('time-limit = 10\nnodes = 3\nnemesis = ["kill-controller"]\n')
    spec = build_spec({**load_toml(cfg), "nodes": 4})
    assert (spec.time_limit, spec.nodes, spec.nemesis) == (10, 4, ("kill-controller",))
    assert RunSpec.from_json(spec.to_json()) == spec
    with pytest.raises(UsageError):
        build_spec({"nodes": 0})


def test_generator_is_a_pure_function_of_the_seed() -> None:
    def take(seed: int, w: int) -> list[object]:
        g = QueueGenerator(build_spec({"seed": seed, "partitions": 3}), w)
        return [g.next() for _ in range(200)]

    assert take(5, 0) == take(5, 0)
    assert take(5, 0) != take(6, 0) and take(5, 0) != take(5, 1)
    values = [inv.value[0][2] for w in range(4) for inv in take(5, w) if inv.f == "send"]  # type: ignore[attr-defined]
    assert len(values) == len(set(values)), "sent values are unique across workers"


def test_an_unexpected_exception_is_one_sentence_and_exit_7_not_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A harness bug must never exit 1, which means "anomalies found"; the traceback goes to a file."""
    from harness import cli

    def boom(**_kw: object) -> None:
        raise KeyError("no such thing")

    monkeypatch.setenv("CHAOS_HOME", str(tmp_path))
    monkeypatch.setattr(cli.cli, "main", boom)
    with pytest.raises(SystemExit) as e:
        cli.main(["check", "whatever"])
    assert e.value.code == 7
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error (KeyError" in err and "Traceback" not in err
    assert "Traceback" in (tmp_path / "last-error.txt").read_text()
