"""docs/design.md stays true to the code: its anomaly table, its paths and its phases.

Every expected value is read from the code itself (the checker's constants and `bad_types`, the
phases' `enter` calls, the files on disk), never from a list copied here, so a new anomaly, a new
phase or a moved module fails this test until the design says so. No Docker, Spark or ZooKeeper.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
#: the repository's own top-level folders and files a backticked path may start with
TOP = ("kernel", "harness", "workloads", "nemesis", "results", "cluster-impl", "tests", "docs")
TOP_FILES = ("README.md", "Makefile", "pyproject.toml", "nightly.toml")
PACKAGES = ("kernel", "harness", "workloads", "nemesis", "results")
FILE_SUFFIXES = ("json", "jsonl", "py", "md", "toml", "html", "png", "log", "svg")


def _text() -> str:
    return DESIGN.read_text(encoding="utf-8")


def _section(title: str) -> str:
    """The body of the `## title` section (up to the next `## ` heading)."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", _text(), re.MULTILINE | re.DOTALL)
    assert m is not None, f"docs/design.md has no section '## {title}'"
    return m.group(1)


# --- (a) the anomaly table ---------------------------------------------------------------------------

def _code_anomalies() -> set[str]:
    """Every anomaly name the checker can put in results.json, from its own registries."""
    from results import commits, cycles, hanging
    from results.anomalies import DEFINITIONS
    from results.check import ALWAYS_BAD, CYCLE_BAD

    names = set(DEFINITIONS) | set(ALWAYS_BAD) | set(CYCLE_BAD) | set(cycles.CYCLE_TYPES) | {hanging.NAME}
    names |= {name for name, _ in commits._findings([])}  # the commit checks' names, in report order
    return names


def _code_invalid() -> tuple[set[str], set[str]]:
    """(every anomaly that can make a run invalid, those that do so only under some condition)."""
    from results.check import CYCLE_BAD, bad_types

    strict = set(bad_types(None))  # a bare history, drained: the strictest judgement
    lenient = set(bad_types({"config": {"idempotence": False, "sub_via": ["subscribe"]}}, drained=False))
    return strict | set(CYCLE_BAD), (strict - lenient) | set(CYCLE_BAD)


def _table() -> dict[str, str]:
    """Anomaly name -> its "invalid?" cell, from the table of the Anomalies section."""
    rows: dict[str, str] = {}
    for line in _section("Anomalies").splitlines():
        m = re.match(r"^\|\s*`([^`]+)`\s*\|.*\|\s*([^|]+?)\s*\|\s*$", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} has two rows in the anomaly table"
            rows[m.group(1)] = m.group(2)
    return rows


def test_the_anomaly_table_names_every_anomaly_the_checker_reports() -> None:
    code, table = _code_anomalies(), _table()
    assert len(code) >= 20, f"the checker's registries gave too few names to be real: {sorted(code)}"
    lacking, invented = sorted(code - set(table)), sorted(set(table) - code)
    assert not lacking, f"anomalies the checker reports that docs/design.md's table lacks: {lacking}"
    assert not invented, f"anomalies in docs/design.md's table the checker never reports: {invented}"


def test_the_anomaly_table_marks_exactly_the_invalid_making_ones() -> None:
    invalid, conditional = _code_invalid()
    table = _table()
    for name, cell in table.items():
        assert cell == "yes" or cell.startswith(("yes, ", "no")), f"{name}: yes, 'yes, unless ...' or no, not {cell!r}"
    marked = {n for n, cell in table.items() if cell.startswith("yes")}
    assert marked == invalid, (f"the table marks as invalid-making {sorted(marked - invalid)} that the code does not, "
                               f"and misses {sorted(invalid - marked)}")
    marked_conditional = {n for n, cell in table.items() if cell.startswith("yes, ")}
    assert marked_conditional == conditional, (
        f"conditionally invalid in the code: {sorted(conditional)}; in the table: {sorted(marked_conditional)}")


# --- (b) paths -------------------------------------------------------------------------------------------

def _backticked() -> list[str]:
    return re.findall(r"`([^`\n]+)`", _text())


def _repo_paths() -> list[str]:
    """Backticked words that are paths inside the repository (placeholders like `<node>` left out)."""
    out = []
    for word in _backticked():
        word = word.rstrip(".,;:")
        if re.search(r"[\s<>*{}$]", word) or word.startswith(("/", "~", "..")):
            continue
        if word in TOP_FILES or ("/" in word and word.split("/")[0] in TOP):
            out.append(word)
    return out


def _defines(path: Path, name: str) -> bool:
    """Whether module `path` binds `name` at its top level (def, class, assignment or import)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def _module_problem(dotted: str) -> str | None:
    """Why `kernel.history.columns` or `harness.fleet.search.EXECUTOR_JAVA` names nothing (None: it does)."""
    parts = dotted.split(".")
    for i in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:i])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[i:]
            if rest and not _defines(module, rest[0]):
                return f"{module.relative_to(ROOT)} defines no {rest[0]}"
            return None
    return "no such module"


def test_every_repository_path_in_the_design_exists() -> None:
    paths = _repo_paths()
    assert len(paths) >= 30, f"too few paths found to be a real check: {paths}"
    missing = sorted({p for p in paths if not (ROOT / p).exists()})
    assert not missing, f"docs/design.md names paths that do not exist: {missing}"


def test_every_module_name_in_the_design_exists() -> None:
    dotted = {w for w in _backticked() if re.fullmatch(rf"(?:{'|'.join(PACKAGES)})(?:\.\w+)+", w)
              and w.rsplit(".", 1)[1] not in FILE_SUFFIXES}  # `results.json` is a file, not a module
    assert dotted, "no dotted module names found to check"
    bad = {d: why for d in sorted(dotted) if (why := _module_problem(d)) is not None}
    assert not bad, f"docs/design.md names modules or attributes that do not exist: {bad}"


# --- (c) phases -------------------------------------------------------------------------------------------

def _code_phases() -> set[str]:
    """The phase names a run records in test.json (`RunRecord.enter("...")` and its initial phase), and
    the phase context managers `harness/run.py` nests (what it imports from `harness.phases`)."""
    names: set[str] = set()
    for rel in ("harness/phases.py", "harness/run.py"):
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "enter"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "phase" \
                    and isinstance(node.value, ast.Constant):
                names.add(node.value.value)  # RunRecord's phase before the first enter
            if isinstance(node, ast.ImportFrom) and node.module == "harness.phases" and rel == "harness/run.py":
                names.update(a.name for a in node.names)
    return names


def test_the_phases_section_names_every_phase_the_code_defines() -> None:
    phases = _code_phases()
    assert {"provision", "deploy", "workload", "heal", "drain", "collect", "check"} <= phases, phases
    assert {"provisioned", "armed", "drained"} <= phases, phases
    section = _section("A run's phases")
    missing = sorted(p for p in phases if f"`{p}`" not in section)
    assert not missing, f"phases the code defines that the phases section of docs/design.md does not name: {missing}"
