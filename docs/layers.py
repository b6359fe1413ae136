"""Draw `docs/layers.svg`, the picture of docs/design.md, from the code itself (`make docs`).

Why generated: a hand-drawn architecture picture is true on the day it is drawn. This one is read off
the import graph (every `import` of every module, as `tests/foundation/test_layers.py` reads it, with
this module's reader) and off the phases the run enters (`rec.enter("...")` in `harness/`), so a new
arrow between layers or a new phase shows up the next time `make docs` runs — and
`tests/docs/test_layers_picture.py` fails until it has. The import edges are also written into the
SVG's description, which is what that test compares: the drawing may move with matplotlib's version,
the edges may not.

Left: the layers, top to bottom, with an arrow for each pair of boxes where one imports the other
(its width grows with the number of module-level imports). Right: what a run does, phase by phase,
and the files each leaves in the run's directory.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernel", "harness", "workloads", "nemesis", "results")
OUT = ROOT / "docs" / "layers.svg"


# --- the import graph (shared with tests/foundation/test_layers.py) ---------------------------------

def module_name(path: Path, root: Path = ROOT) -> str:
    """`harness/run.py` -> `harness.run`; a package's `__init__.py` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports (absolute names), outside `if TYPE_CHECKING:` blocks: type-only
    imports carry no dependency at run time, and the layer rules are about run time."""
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def our_modules() -> dict[str, set[str]]:
    """Each module of the harness's packages and what it imports (files copied into the node image excluded)."""
    mods: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "files" in path.relative_to(ROOT).parts:
                continue
            mods[module_name(path)] = imports_of(path)
    return mods


def resolve(name: str, modules: dict[str, set[str]]) -> str | None:
    """The longest module of ours that `name` names or lies inside (`kernel.history.Op` -> `kernel.history`)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in modules:
            return cand
    return None


def module_edges(modules: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every import between two modules of ours."""
    out = []
    for mod, names in modules.items():
        for n in names:
            target = resolve(n, modules)
            if target is not None and target != mod:
                out.append((mod, target))
    return out


# --- the boxes of the picture -----------------------------------------------------------------------

#: The boxes, in the order they are drawn within a row; the first pattern that matches a module names
#: its box. Rows are not given: each box sits one row above the highest box it imports (row 0 imports
#: nothing of ours), so the picture shows the layering the code has, not the one intended.
BOXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("commands (chaos ...)", re.compile(r"^harness\.(cli|\w+_cli)$")),
    ("benchmarks", re.compile(r"^harness\.bench\b")),
    ("registry", re.compile(r"^harness\.registry$")),
    ("simulator adapter", re.compile(r"^harness\.provision\.sim\w*$")),
    ("provisioners", re.compile(r"^harness\.provision\b")),
    ("systems, image", re.compile(r"^harness\.(systems|db|image)\b")),
    ("harness helpers", re.compile(r"^harness\.(runtime|ssh|signals)$")),
    ("orchestrator", re.compile(r"^harness\b")),
    ("workloads", re.compile(r"^workloads\b")),
    ("nemesis", re.compile(r"^nemesis\b")),
    ("results (checks)", re.compile(r"^results\b")),
    ("kernel", re.compile(r"^kernel\b")),
)
#: cluster-impl's packages are not imported by the harness (but for the simulator's one adapter):
#: they are drawn beside the layers, with the adapter's import as their one arrow
OUTSIDE = {"logsim": "logsim (cluster-impl/)"}


def box_of(module: str) -> str:
    for box, pattern in BOXES:
        if pattern.match(module):
            return box
    raise ValueError(f"no box for module {module}")


def box_edges() -> Counter[tuple[str, str]]:
    """How many module-level imports go from one box to another (imports inside a box not counted)."""
    mods = our_modules()
    count: Counter[tuple[str, str]] = Counter()
    for a, b in module_edges(mods):
        if box_of(a) != box_of(b):
            count[(box_of(a), box_of(b))] += 1
    for mod, names in mods.items():
        for pkg, box in OUTSIDE.items():
            if any(n == pkg or n.startswith(pkg + ".") for n in names):
                count[(box_of(mod), box)] += 1
    return count


def rows(edges: Counter[tuple[str, str]]) -> dict[str, int]:
    """Each box's row: one above the highest box it imports. A cycle between boxes has no rows, and is
    an error: the layers would not be layers."""
    import networkx as nx

    g = nx.DiGraph(list(edges))
    g.add_nodes_from(b for b, _p in BOXES)
    if not nx.is_directed_acyclic_graph(g):
        raise SystemExit(f"the boxes import each other in a cycle: {nx.find_cycle(g)}")
    row: dict[str, int] = {}
    for box in reversed(list(nx.topological_sort(g))):
        row[box] = 1 + max((row[b] for b in g.successors(box)), default=-1)
    return row


def description(edges: Counter[tuple[str, str]]) -> str:
    """The edges as text, sorted: what the SVG carries and the test compares."""
    return "; ".join(f"{a} -> {b} ({n})" for (a, b), n in sorted(edges.items()))


# --- the run's phases -------------------------------------------------------------------------------

#: the files each phase leaves in the run's directory (store/<name>/<time>-<seed>/)
PHASE_FILES = {
    "provision": "test.json (config, seed)",
    "deploy": "test.json (system)",
    "workload": "history.jsonl (ops, faults)",
    "heal": "history.jsonl (heals)",
    "drain": "history.jsonl (final reads)",
    "collect": "replicas/, nodes/",
    "check": "results.json, report.html",
}


def phases() -> list[str]:
    """The phases a run enters, in order, read from `rec.enter("...")` in harness/phases.py and run.py."""
    out: list[str] = []
    for rel in ("harness/phases.py", "harness/run.py"):
        for node in ast.walk(ast.parse((ROOT / rel).read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "enter"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                name = node.args[0].value
                if name not in out and name != "done":
                    out.append(name)
    return out


# --- drawing ----------------------------------------------------------------------------------------

def draw(path: Path = OUT) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    plt.rcParams.update({"svg.hashsalt": "chaos-layers", "svg.fonttype": "none", "font.size": 9})
    edges = box_edges()
    fig = plt.figure(figsize=(13, 7.5))
    ax = fig.add_axes((0, 0, 0.64, 1))
    ax.set_xlim(0, 100)
    ax.set_ylim(-6, 100)
    ax.axis("off")

    row = rows(edges)
    order = [b for b, _p in BOXES] + list(OUTSIDE.values())
    by_row: dict[int, list[str]] = {}
    for box in sorted(row, key=order.index):
        by_row.setdefault(row[box], []).append(box)
    top = max(by_row)
    pos: dict[str, tuple[float, float]] = {}
    w, h = 17.0, 6.5
    for r, boxes in by_row.items():
        y = 4 + r * (88 / top)
        span = 92.0 / len(boxes)
        for i, box in enumerate(boxes):
            pos[box] = (4 + span * i + span / 2, y)
    palette = ("#dde8f5", "#e3f2e1", "#fdf0d5", "#f6e0e0", "#ece6f6", "#eeeeee", "#f2f2f2", "#f8f8f8")
    for box, (x, y) in pos.items():
        outside = box in OUTSIDE.values()
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.4",
                                    fc="#ffffff" if outside else palette[row[box] % len(palette)],
                                    ec="#444", lw=1, ls="--" if outside else "-"))
        ax.text(x, y, box, ha="center", va="center")
    biggest = max(edges.values(), default=1)
    for (a, b), n in sorted(edges.items()):
        (xa, ya), (xb, yb) = pos[a], pos[b]
        same_row = abs(ya - yb) < 1
        start = (xa, ya - h / 2) if not same_row else (xa + (w / 2 if xb > xa else -w / 2), ya)
        end = (xb, yb + h / 2) if not same_row else (xb + (-w / 2 if xb > xa else w / 2), yb)
        colour = "#555"
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=9, color=colour,
                                     lw=0.4 + 2.2 * n / biggest, alpha=0.75,
                                     connectionstyle="arc3,rad=0.08"))
    ax.text(50, -4, "an arrow: modules of one box import modules of the other (width: how many); "
            "each box sits above everything it imports", ha="center", color="#444")

    fx = fig.add_axes((0.66, 0, 0.34, 1))
    fx.set_xlim(0, 100)
    fx.set_ylim(0, 100)
    fx.axis("off")
    fx.text(50, 96, "a run (harness/run.py, phases.py)", ha="center", weight="bold")
    steps = phases()
    gap = 84.0 / max(len(steps), 1)
    for i, step in enumerate(steps):
        y = 88 - i * gap
        fx.add_patch(FancyBboxPatch((4, y - 3.2), 34, 6.4, boxstyle="round,pad=0.3", fc="#f4f4f4", ec="#444"))
        fx.text(21, y, step, ha="center", va="center")
        fx.text(42, y, PHASE_FILES.get(step, ""), va="center", color="#333")
        if i + 1 < len(steps):
            fx.add_patch(FancyArrowPatch((21, y - 3.6), (21, y - gap + 3.6), arrowstyle="-|>",
                                         mutation_scale=9, color="#555"))
    fx.text(4, 2, "faults run beside the workload; every choice comes from the seed",
            color="#444", fontsize=8)
    text = description(edges)
    fig.savefig(path, format=path.suffix.lstrip(".") or "svg", metadata={"Title": "chaos: layers and a run",
                                              "Description": text, **({"Date": None} if path.suffix == ".svg" else {})})
    plt.close(fig)
    return text


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    draw(out)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
