"""The glossary of `docs/extending.md` defines every term the CLI's help and the report use, every
anomaly the checker can report, and every fault family, workload and system a run can name.

The terms are collected from the code each time, never copied here: the help of every `chaos`
command and sub-command (through click's `CliRunner`, recursively through the groups), the report's
templates and the string literals of the code that builds the pages, the checker's own lists of
anomaly types, and the registries. From the help and the report, the terms are the acronyms (words
of two or more capitals, and runs of them such as "NOT EXERCISED"). These are left out:
- environment variables (`$ELLE_CLI`, any word with an underscore) and click's placeholders: each
  command's usage pieces, its parameters' metavars and names (`PATH`, `INTEGER RANGE`, `RUN_DIR`,
  `NODE` in "Run CMD on NODE");
- URLs and file names (`spark://HOST:7077`, `process:FILE.toml`, `cluster-impl/README.md`);
- `GENERIC`, the short list of computing's own acronyms below.
Beside those: every verdict a page can show (`results.pages.VERDICT_COLORS`), the words the issue
named (`ISSUE_TERMS`) and the vocabulary the docs lean on (`CORE_TERMS`). A term is covered when some
glossary entry has it among its bold names (ignoring case). No Docker, Spark or ZooKeeper; about a
second.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "extending.md"
TEMPLATES = ROOT / "results" / "templates"
#: the code that builds the report and the store's pages: its string literals may reach a page
REPORT_CODE = ("results/report.py", "results/present.py", "results/index.py", "results/pages.py")

#: acronyms of computing in general, not ours to define (keep this short: anything of ours, or of
#: Kafka's, belongs in the glossary)
GENERIC = frozenset({
    "JSON", "TOML", "XML",  # file formats
    "URL",  # an address
    "SSH",  # the remote shell
    "MB",  # a size
})
#: the words the issue named as missing from the docs
ISSUE_TERMS = ("HW", "LSO", "ISR", "ELR", "probe", "grudge", "screen", "drain")
#: the vocabulary the docs, the code and the report lean on, beyond the acronyms and the registries
CORE_TERMS = (
    "LEO", "epoch", "leader epoch", "nemesis", "family", "kind", "composition", "heal", "history",
    "invoke", "ok", "fail", "info", "process", "worker", "seed", "schedule", "replay", "shrink",
    "verdict", "valid", "invalid", "unknown", "anomaly", "bug switch", "mix", "system under test",
    "capability", "role", "provisioner", "backend", "runtime", "simulator", "fleet", "check server",
    "store", "run", "nightly", "detect", "sim-search", "acks", "min.insync.replicas",
    "transactional id", "zombie", "ctp", "read_committed", "FUSE disk", "lazyfs", "fsync",
    "power loss", "clock skew", "libfaketime", "coverage probe", "high watermark",
)

#: a word of capitals (digits allowed after the first), perhaps in a plural; runs of them joined
_WORD = r"[A-Z][A-Z0-9_]*[A-Z0-9]"
ACRONYMS = re.compile(rf"(?<![\w$]){_WORD}(?:s?(?: {_WORD})+)?s?(?!\w)")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S*")
FILE_NAME = re.compile(r"\S*\.(?:md|toml|jsonl|json|html|xml|py|txt|log|png|svg|jar|parquet|clj)\b\S*")
ENV_VAR = re.compile(r"\$\{?\w+\}?")
COLOUR = re.compile(r"#[0-9A-Fa-f]{3,8}\b")
#: a glossary entry: `- **name** / **other name**: definition`, perhaps continued on indented lines
ENTRY = re.compile(r"^- (\*\*[^*\n]+\*\*(?: / \*\*[^*\n]+\*\*)*): (\S.*)$")


def acronyms(text: str, placeholders: frozenset[str] = frozenset()) -> set[str]:
    """The acronyms (and runs of them) in `text`, without URLs, file names, environment variables,
    colours, and the words in `placeholders`. A run broken by a left-out word gives its parts."""
    for pattern in (URL, FILE_NAME, ENV_VAR, COLOUR):
        text = pattern.sub(" ", text)
    text = " ".join(text.split())
    out: set[str] = set()
    for match in ACRONYMS.finditer(text):
        run: list[str] = []
        for word in [*match.group(0).split(" "), ""]:
            word = word[:-1] if word.endswith("s") else word
            if word and "_" not in word and word not in placeholders:
                run.append(word)
            elif run:
                out.add(" ".join(run))
                run = []
    return out


@dataclass(frozen=True)
class Help:
    path: tuple[str, ...]
    text: str
    placeholders: frozenset[str]


def _placeholders(cmd: click.Command, ctx: click.Context) -> frozenset[str]:
    """Click's own words for what a user types in: the usage pieces, each parameter's metavar (from
    its help record's left column, or its `make_metavar`), and its name and options in capitals."""
    pieces = list(cmd.collect_usage_pieces(ctx))
    for p in cmd.get_params(ctx):
        record = p.get_help_record(ctx)
        if record is not None:
            pieces.append(record[0])
        try:
            pieces.append(p.make_metavar(ctx))
        except TypeError:  # click before 8.2: no context argument
            pieces.append(p.make_metavar())  # type: ignore[call-arg]
        # its name and option names in capitals: "Provision NODES nodes" is the value of `--nodes`
        pieces += [n.lstrip("-").upper().replace("-", "_") for n in (p.name or "", *p.opts, *p.secondary_opts)]
    return frozenset(w for piece in pieces for w in re.findall(r"[A-Z][A-Z0-9_]+", piece))


@cache
def cli_help() -> tuple[Help, ...]:
    """`chaos [group ...] COMMAND --help` for every command and sub-command, as a user gets it."""
    from harness.cli import cli

    runner = CliRunner()
    root = logging.getLogger()
    handlers = list(root.handlers)  # the group's callback installs a console handler on each call
    out: list[Help] = []

    def walk(cmd: click.Command, path: tuple[str, ...], parent: click.Context | None) -> frozenset[str]:
        """Ask `cmd` for its help, then its sub-commands; return its placeholders, a group's including
        its sub-commands' (their one-line help is in the group's: "exec  Run CMD on NODE ...")."""
        res = runner.invoke(cli, [*path, "--help"], prog_name="chaos", catch_exceptions=False)
        assert res.exit_code == 0 and res.output.startswith("Usage: chaos"), (path, res.output[-500:])
        ctx = click.Context(cmd, info_name=path[-1] if path else "chaos", parent=parent)
        placeholders = _placeholders(cmd, ctx)
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, (path, name)
                placeholders |= walk(sub, (*path, name), ctx)
        out.append(Help(path, res.output, placeholders))
        return placeholders

    try:
        walk(cli, (), None)
    finally:
        root.handlers[:] = handlers
    return tuple(out)


def cli_terms() -> dict[str, list[str]]:
    """Each acronym of the CLI's help but the generic ones -> the commands whose help uses it."""
    out: dict[str, list[str]] = {}
    for h in cli_help():
        for term in acronyms(h.text, h.placeholders) - GENERIC:
            out.setdefault(term, []).append(" ".join(("chaos", *h.path)))
    return out


def _template_text(path: Path) -> str:
    """What a template shows a reader: its text, and the string literals of its Jinja expressions and
    tags (`{{ 'yes' if b.hit else 'NOT EXERCISED' }}`); without Jinja's comments, scripts, styles,
    HTML tags and entities."""
    text = path.read_text()
    for pattern in (r"\{#.*?#\}", r"<script\b.*?</script>", r"<style\b.*?</style>"):
        text = re.sub(pattern, " ", text, flags=re.S)
    text = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", lambda m: " ; ".join(a or b for a, b in re.findall(
        r"'([^']*)'|\"([^\"]*)\"", m.group(0))) or " ", text, flags=re.S)
    return re.sub(r"<[^>]*>|&#?\w+;", " ", text)


def _literals(path: Path) -> Iterator[str]:
    """The string constants of a module, without its docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n.value


def report_terms() -> dict[str, list[str]]:
    """Each term of the pages -> where: the acronyms of the templates and of the page-building code's
    string literals, and every verdict a page can show (the badge writes it in capitals)."""
    from results.pages import VERDICT_COLORS

    out: dict[str, list[str]] = {}
    for t in sorted(TEMPLATES.glob("*.html")):
        for term in acronyms(_template_text(t)):
            out.setdefault(term, []).append(str(t.relative_to(ROOT)))
    for rel in REPORT_CODE:
        for s in _literals(ROOT / rel):
            for term in acronyms(s):
                out.setdefault(term, []).append(rel)
    for v in VERDICT_COLORS:
        out.setdefault(v, []).append("results/pages.py VERDICT_COLORS")
    return {t: where for t, where in out.items() if t not in GENERIC}


def anomaly_types() -> set[str]:
    """Every anomaly type the checker can put in results.json, from its own lists: the definitions of
    the Spark checks and the cycles, the bad types, the cycle types, and the checks beside Spark."""
    from results import commits, hanging
    from results.anomalies import CHECKERS, DEFINITIONS
    from results.check import ALWAYS_BAD, CYCLE_BAD, EMPTY

    return {*DEFINITIONS, *CHECKERS, *ALWAYS_BAD, *CYCLE_BAD, EMPTY, hanging.NAME,
            *(name for name, _ in commits._findings([]))}


def registry_names() -> dict[str, set[str]]:
    """The names a run takes from the registries: fault families, workloads, systems."""
    from harness.systems import NAMES
    from nemesis.registry import FAMILIES
    from workloads.registry import WORKLOADS

    return {"fault family": set(FAMILIES), "workload": set(WORKLOADS), "system": set(NAMES)}


def glossary(text: str) -> dict[str, str]:
    """The `## Glossary` section's entries: each bold name (lowercase) -> its entry's definition.
    Every list item of the section must be an entry, and no name may appear twice."""
    assert "\n## Glossary\n" in text, f"{GUIDE} has no '## Glossary' section"
    section = text.split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0]
    entries: dict[str, str] = {}
    names: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            m = ENTRY.match(line)
            assert m, f"not a glossary entry (`- **name** / **name**: definition`): {line!r}"
            names = [n.strip("`").lower() for n in re.findall(r"\*\*([^*]+)\*\*", m.group(1))]
            for n in names:
                assert n not in entries, f"{n!r} has two glossary entries"
                entries[n] = m.group(2)
        elif line.startswith("  ") and names:
            for n in names:
                entries[n] += " " + line.strip()
        else:
            names = []
    return entries


def missing(terms: dict[str, list[str]] | set[str], entries: dict[str, str]) -> list[str]:
    return sorted(t for t in terms if t.lower() not in entries)


def _where(terms: dict[str, list[str]], absent: list[str]) -> str:
    return "; ".join(f"{t} (in {', '.join(sorted(set(terms[t]))[:3])})" for t in absent)


def test_the_glossary_is_a_list_of_defined_terms() -> None:
    entries = glossary(GUIDE.read_text())
    assert len(entries) >= 100, f"only {len(entries)} glossary names"
    short = sorted(n for n, d in entries.items() if len(d.split()) < 5)
    assert not short, f"glossary entries without a real definition (fewer than five words): {short}"


def test_every_command_was_asked_for_its_help() -> None:
    from harness.cli import COMMANDS

    seen = {h.path for h in cli_help()}
    assert {p[0] for p in seen if p} == set(COMMANDS)
    assert ("cluster", "exec") in seen and ("check-server", "status") in seen  # the groups' sub-commands too


def test_the_glossary_covers_the_acronyms_of_the_clis_help() -> None:
    terms = cli_terms()
    assert terms, "no acronym found in any help: the extraction is broken"
    absent = missing(terms, glossary(GUIDE.read_text()))
    assert not absent, f"the CLI's help uses terms the glossary of {GUIDE.name} lacks: {_where(terms, absent)}"


def test_the_glossary_covers_the_terms_of_the_report() -> None:
    terms = report_terms()
    absent = missing(terms, glossary(GUIDE.read_text()))
    assert not absent, f"the report uses terms the glossary of {GUIDE.name} lacks: {_where(terms, absent)}"


def test_the_glossary_names_every_anomaly_the_checker_can_report() -> None:
    types = anomaly_types()
    assert {"lost-write", "G1a", "commit-regression", "hanging-transaction"} <= types and len(types) >= 20
    absent = missing(types, glossary(GUIDE.read_text()))
    assert not absent, f"anomaly types without a glossary entry in {GUIDE.name}: {absent}"


def test_the_glossary_names_every_fault_family_workload_and_system() -> None:
    entries = glossary(GUIDE.read_text())
    absent = {what: gone for what, names in registry_names().items() if (gone := missing(names, entries))}
    assert not absent, f"registered names without a glossary entry in {GUIDE.name}: {absent}"


def test_the_glossary_has_the_words_the_docs_lean_on() -> None:
    absent = missing({*ISSUE_TERMS, *CORE_TERMS}, glossary(GUIDE.read_text()))
    assert not absent, f"terms without a glossary entry in {GUIDE.name}: {absent}"


def test_the_extraction_finds_terms_and_leaves_out_placeholders() -> None:
    text = ("Wait for a full ISR and the HWs; Ctrl-C/SIGTERM; NOT EXERCISED. Usage: chaos x [OPTIONS] RUN_DIR "
            "--timeout FINITE NUMBER, $ELLE_CLI, spark://HOST:7077, process:FILE.toml, cluster-impl/README.md, "
            "#C62828, Run CMD on NODE")
    assert acronyms(text, frozenset({"OPTIONS", "FINITE", "NUMBER", "CMD", "NODE"})) == {
        "ISR", "HW", "SIGTERM", "NOT EXERCISED"}
    assert acronyms("G1a is not an acronym, nor is Kafka; JVM is") == {"JVM"}


def test_an_entry_taken_out_is_missed() -> None:
    """The checks above cannot pass on an empty or truncated glossary: dropping the entries of ISR,
    lost-write and partition makes each of them missing."""
    text = GUIDE.read_text()
    kept = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("- **ISR**", "- **lost-write**", "- **partition**")))
    entries = glossary(kept)
    assert missing(cli_terms(), entries) == ["ISR"]
    assert missing(anomaly_types(), entries) == ["lost-write"]
    assert missing(registry_names()["fault family"], entries) == ["partition"]
