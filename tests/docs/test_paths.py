"""Nothing in the repository sends a reader or a user to a path outside it.

A clone is all a user has: a document that says "see ../shared/DESIGN.md", or code whose default is
a directory on the machine the harness was written on, works only there. Every file git knows is
read (documents, product code, configuration, kept runs' pages). Tests and benchmarks are the one
exception the design allows: they may look for the outside tools they compare against (Jepsen's
checker, elle-cli, librdkafka's test suite) in a default place, but only after a variable or flag the
user can set, so such a file must also read an environment variable.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\.\./(shared|\.library)\b|/work/|\bshared/(DESIGN|STYLE|seeds|tools)\b")
#: tests and benchmarks: allowed a default outside place after an environment variable
TOOLING = re.compile(r"^(tests/|cluster-impl/tests/|cluster-impl/bench/|harness/bench/|results/bench\.py$)")
ENV_FIRST = re.compile(r"os\.environ|getenv|\$\{?[A-Z_]+")


def _files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return [f for f in out if f and (ROOT / f).is_file()]


def _text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:4096]:
        return None
    return data.decode("utf-8", errors="replace")


def test_no_file_names_a_path_outside_the_repository() -> None:
    bad = []
    for rel in _files():
        text = _text(ROOT / rel)
        if text is None or rel == "tests/docs/test_paths.py":
            continue
        hits = [f"{rel}:{i}: {line.strip()[:140]}" for i, line in enumerate(text.splitlines(), 1)
                if OUTSIDE.search(line)]
        if hits and TOOLING.match(rel) and ENV_FIRST.search(text):
            continue
        bad.extend(hits)
    assert not bad, "paths outside the repository (a clone does not have them):\n" + "\n".join(bad)


def test_the_rule_sees_what_it_must() -> None:
    """The pattern is not vacuous: it catches the shapes it exists for, and not ordinary paths."""
    for line in ("see `../shared/DESIGN.md`", "default=Path('/work/scratch/x')", "shared/tools/elle-cli",
                 "../.library/search"):
        assert OUTSIDE.search(line), line
    for line in ("docs/design.md", "store/queue/", "harness/systems/tansu/", "/var/cache/chaos"):
        assert not OUTSIDE.search(line), line
    assert len(_files()) > 300
