"""The probe registry: names are checked at placement, every registered probe is placed in the broker's
code, every bug switch names a registered probe, counts go to the current scope and to a process's
file, and the README's table is the registry's."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import logbroker
import pytest
from logbroker import probes
from logbroker.bugs import Bug
from logbroker.dump import main as dump_main

README = Path(__file__).resolve().parents[2] / "README.md"


def _import_all() -> None:
    for m in pkgutil.walk_packages(logbroker.__path__, "logbroker."):
        importlib.import_module(m.name)


def test_an_unregistered_name_is_refused_where_it_is_placed() -> None:
    with pytest.raises(KeyError, match="follower-truncates-bellow-hw"):
        probes.probe("follower-truncates-bellow-hw")


def test_every_registered_probe_is_placed_in_the_broker() -> None:
    _import_all()
    assert sorted(set(probes.PROBES) - probes.PLACED) == []
    assert len(probes.PROBES) >= 40


def test_every_placed_name_is_a_literal_the_registry_knows() -> None:
    """A `probe(...)` call with a computed name would escape the import-time check."""
    src = Path(logbroker.__file__).parent
    for f in src.rglob("*.py"):
        for name in re.findall(r"\bprobe\(([^)]*)\)", f.read_text()):
            if f.name == "probes.py":
                continue
            assert name.startswith('"') and name.strip('"') in probes.PROBES, (f, name)


def test_every_bug_switch_names_the_probe_of_its_scenario() -> None:
    assert set(probes.BUG_PROBES) == {b.value for b in Bug}
    assert set(probes.BUG_PROBES.values()) <= set(probes.PROBES)


def test_the_readme_table_is_the_registry() -> None:
    text = README.read_text()
    m = re.search(r"<!-- probes table: .*? -->\n(.*?)<!-- end of probes table -->", text, re.S)
    assert m is not None, "the README lost its probes table markers"
    assert m.group(1) == probes.table(), "regenerate it: python -m logbroker.probes"


def test_counts_go_to_the_current_scope_and_otherwise_to_the_process() -> None:
    hit = probes.probe("controller-failover")
    mine: dict[str, int] = {}
    at_start = probes.process_counts().get("controller-failover", 0)
    before = probes.set_scope(None)
    try:
        probes.set_scope(lambda: mine)
        hit()
        hit()
        probes.set_scope(None)
        hit()
    finally:
        probes.set_scope(before)
    assert mine == {"controller-failover": 2}
    assert probes.process_counts()["controller-failover"] == at_start + 1


def test_a_process_file_is_written_at_a_first_hit_and_summed_by_the_dump(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "_PROCESS", {})
    monkeypatch.setattr(probes, "_file", None)
    d = tmp_path / "probes"
    f = probes.persist_to(d)
    probes.probe("unclean-leader-election")()
    assert json.loads(f.read_text()) == {"unclean-leader-election": 1}
    (d / "probes-1-2.json").write_text(json.dumps({"unclean-leader-election": 2, "controller-failover": 1}))
    (tmp_path / "logs").mkdir()
    out = tmp_path / "out"
    assert dump_main(["--log-dirs", str(tmp_path / "logs"), "--out", str(out), "--probes-dir", str(d)]) == 0
    got = json.loads((out / "probes.json").read_text())
    assert got["counts"] == {"controller-failover": 1, "unclean-leader-election": 3} and got["processes"] == 2
    assert got["probes"] == probes.PROBES and got["bug_probes"] == probes.BUG_PROBES


def test_probes_off_count_nothing_and_still_refuse_an_unknown_name() -> None:
    """`LOGBROKER_PROBES=off` exists only for the benchmark of what probes cost: the same broker code,
    every probe a no-op — and a misspelt name still fails at import."""
    code = ("from logbroker import probes\n"
            "p = probes.probe('follower-truncates-below-hw'); p(); p()\n"
            "with probes.counting() as got:\n    p()\n"
            "print(probes.process_counts(), got)\n"
            "try:\n    probes.probe('no-such-probe')\nexcept KeyError:\n    print('refused')\n")
    env = {**os.environ, "LOGBROKER_PROBES": "off", "PYTHONPATH": str(Path(logbroker.__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["{} {}", "refused"]
    env["LOGBROKER_PROBES"] = "on"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[0] == "{'follower-truncates-below-hw': 2} {'follower-truncates-below-hw': 1}"
