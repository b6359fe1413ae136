"""The broker's layering as a test (docs/design.md, "The simulator and its seams"; issue 18).

It reads every `logbroker` module's imports with `ast` — top-level, function-local and
`TYPE_CHECKING` alike, since a cycle hidden behind either is still a cycle for a reader — and fails on:
- any import cycle between `logbroker`'s modules;
- a decision core (the pure rules a simulator drives) importing, directly or through other
  `logbroker` modules, anything of asyncio, sockets, threads, ZooKeeper (kazoo) or the clock's
  `time` module.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "logbroker"

#: The pure decision cores: no I/O, no event loop, no threads, no wall clock.
DECISION_CORES = (
    "logbroker.replication.decisions",
    "logbroker.controller.decisions",
    "logbroker.controller.reassignment",
    "logbroker.replication.truncation",
    "logbroker.replication.fetch_state",
    "logbroker.txn.state",
)
FORBIDDEN = ("asyncio", "socket", "threading", "kazoo", "time", "concurrent", "selectors", "subprocess")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, *, runtime: bool = False) -> set[tuple[str, str | None]]:
    """(module, name) for each `import module` (name None) and `from module import name`. `runtime`:
    only what importing this module executes — module level, outside `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(), str(path))
    if runtime:
        nodes: list[ast.stmt] = []
        todo = list(tree.body)
        while todo:
            n = todo.pop()
            if isinstance(n, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(n.test):
                    todo += n.body + n.orelse
            elif isinstance(n, ast.Try):
                todo += n.body + n.orelse + n.finalbody + [s for h in n.handlers for s in h.body]
            else:
                nodes.append(n)
        walk: list[ast.AST] = list(nodes)
    else:
        walk = list(ast.walk(tree))
    out: set[tuple[str, str | None]] = set()
    for node in walk:
        if isinstance(node, ast.Import):
            out.update((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.update((node.module, a.name) for a in node.names)
    return out


def _targets(imp: tuple[str, str | None], mods: set[str]) -> set[str]:
    """The modules of ours an import loads: `from pkg import sub` loads `pkg.sub` when that is a module
    (its package is loaded by every import of a submodule, so it is not an edge of its own)."""
    module, name = imp
    if name is not None and f"{module}.{name}" in mods:
        return {f"{module}.{name}"}
    return {module} & mods


Graph = dict[str, set[str]]  # module -> the modules of ours it imports


def _graph(*, runtime: bool = False) -> tuple[Graph, dict[str, set[tuple[str, str | None]]]]:
    mods = {_module_name(p): _imports(p, runtime=runtime) for p in sorted(PKG.rglob("*.py"))}
    g: Graph = {m: set() for m in mods}
    for m, imps in mods.items():
        for imp in imps:
            g[m] |= _targets(imp, set(mods)) - {m}
    return g, mods


def _descendants(g: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for n in g[todo.pop()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def _cycles(g: Graph) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def _parents(m: str) -> list[str]:
    parts = m.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def test_the_graph_sees_the_modules() -> None:
    g, mods = _graph()
    assert "logbroker.replication.manager" in mods and "logbroker.controller.operations" in mods
    assert "logbroker.controller.operations" in g["logbroker.controller.controller"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_logbroker() -> None:
    g, _ = _graph()
    cycles = _cycles(g)
    assert cycles == [], f"import cycles: {cycles}"


def test_decision_cores_import_no_io() -> None:
    """What importing a decision core executes — its module-level imports, its packages' `__init__`,
    and theirs in turn — includes nothing of the event loop, sockets, threads, kazoo or time."""
    g, mods = _graph(runtime=True)
    for m in mods:
        for parent in _parents(m):
            if parent in mods:
                g[m].add(parent)
    bad = {}
    for core in DECISION_CORES:
        assert core in mods, core
        reach = {core} | _descendants(g, core)
        found = sorted({f"{m} imports {i}" for m in reach for i, _ in mods[m] if i.split(".")[0] in FORBIDDEN})
        if found:
            bad[core] = found
    assert bad == {}, bad


def test_the_io_check_would_see_a_forbidden_import() -> None:
    g, mods = _graph(runtime=True)
    assert ("asyncio", None) in mods["logbroker.replication.manager"]
    assert "logbroker.core.partition" in _descendants(g, "logbroker.core.broker")
