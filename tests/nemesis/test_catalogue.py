"""`chaos nemeses` and the answer to an unknown `--nemesis` name, both read from the registry."""

from __future__ import annotations

import subprocess

import pytest

from kernel.errors import UsageError
from nemesis.registry import FAMILIES, catalogue, known_names, validate
from tests.conftest import CHAOS


def test_every_kind_has_its_line_and_every_family_its_summary() -> None:
    for info in catalogue():
        fam = FAMILIES[info.name]()
        assert tuple(info.kinds) == fam.kinds and all(line.strip() for line in info.kinds.values()), info.name
        assert info.summary and "\n" not in info.summary, info.name


def test_chaos_nemeses_lists_every_name_that_nemesis_takes() -> None:
    res = subprocess.run([CHAOS, "nemeses"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    listed = {line.split()[0] for line in res.stdout.splitlines() if line.startswith("  ")}
    kinds = {n for n in known_names() if n != "all" and n not in FAMILIES}
    assert listed == kinds


@pytest.mark.parametrize("name, says", [
    ("meteor", "the families are partition, pause"),
    ("kil", "did you mean kill?"),
    ("partition-sidways", "did you mean partition-"),
])
def test_an_unknown_name_gets_a_short_answer(name: str, says: str) -> None:
    with pytest.raises(UsageError) as e:
        validate(["partition", name])
    assert says in str(e.value) and "`chaos nemeses`" in str(e.value)
    assert len(str(e.value)) < 300  # not every kind of every family (it was 716 characters)
