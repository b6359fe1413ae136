"""The README is a user's guide whose commands work as written.

Its shell blocks come in two kinds, told apart by the fence's info string:
- ```` ```sh ````: needs no cluster. Every command is run, in README order, from a scratch directory
  that sees the checkout (so `.venv/bin/chaos`, `nightly.toml` and `docs/` resolve as in a clone) but
  keeps its own `store/`, and must end with exit 0 — or with the code its comment names (`# exit 1: ...`).
- ```` ```sh cluster ````: needs Docker, root or an hour (`make run`, a container run, a night). Each
  `chaos` command is parsed by the CLI itself (click's own parser, every option, type and choice, no
  callback run), and each `make` target must exist, so a renamed flag or target fails here too.
A command in neither kind, a README past 200 lines, or a heading missing from the contents line fails.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from harness.cli import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(sh(?: cluster)?)\n(.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Command:
    line: str
    cluster: bool

    @property
    def expected_exit(self) -> int:
        found = re.search(r"#\s*exit (\d+)", self.line)
        return int(found.group(1)) if found else 0

    @property
    def words(self) -> list[str]:
        return shlex.split(self.line, comments=True)


def commands() -> list[Command]:
    text = README.read_text()
    out = []
    for kind, body in FENCE.findall(text):
        for line in body.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                out.append(Command(line.strip(), kind == "sh cluster"))
    return out


def test_the_readme_is_a_short_guide_with_contents() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md is {len(lines)} lines; the guide keeps at most 200"
    assert lines[2] == "```sh cluster" and "make run" in lines[3] and "make test" in lines[4], \
        "the README starts with the two commands"
    start = next(i for i, line in enumerate(lines) if line.startswith("**Contents:**"))
    end = lines.index("", start)
    contents = "\n".join(lines[start:end])
    for heading in re.findall(r"^## (.+)$", text, re.M):
        anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        assert f"(#{anchor})" in contents, f"the contents line does not link '## {heading}'"
    unfenced = [b for b in re.findall(r"^```(\w*[^\n]*)$", text, re.M) if b not in ("sh", "sh cluster", "")]
    assert not unfenced, f"a shell block must be `sh` or `sh cluster`, not {unfenced}"


def _rest(ctx: click.Context) -> list[str]:
    """What a group left for its sub-command (click 8.2 moved it behind a private name)."""
    return list(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", [])) + list(ctx.args)


def _parse_chaos(words: list[str]) -> None:
    """Let click parse `chaos ...` down to its leaf command, without running any callback."""
    ctx = cli.make_context("chaos", list(words))
    cmd: click.Command = cli
    args = _rest(ctx)
    while isinstance(cmd, click.Group):
        assert args, f"`chaos {' '.join(words)}` names no command"
        name, *args = args
        sub = cmd.get_command(ctx, name)
        assert sub is not None, f"`chaos {name}` is not a command"
        ctx = sub.make_context(name, list(args), parent=ctx)
        cmd, args = sub, _rest(ctx)


def test_every_cluster_command_parses() -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    seen = 0
    for c in commands():
        words = c.words
        if words[0] == "make":
            assert words[1] in targets, f"`{c.line}`: the Makefile has no target {words[1]}"
        else:
            assert words[0] == ".venv/bin/chaos", f"`{c.line}`: a README command is `make` or `.venv/bin/chaos`"
            try:
                _parse_chaos(words[1:])
            except click.exceptions.Exit as e:  # --help, --version: parsed, and done
                assert e.exit_code == 0, f"`{c.line}` exits {e.exit_code} while parsing"
        seen += 1
    assert seen >= 15, f"only {seen} commands found in README.md: is the fence rule still right?"


def _scratch(tmp: Path) -> Path:
    """A directory that sees the checkout but keeps its own store (the README's runs write `store/`)."""
    for entry in ROOT.iterdir():
        if entry.name not in ("store", ".git"):
            (tmp / entry.name).symlink_to(entry)
    return tmp


@pytest.mark.slow
@pytest.mark.spark
def test_every_command_that_needs_no_cluster_runs_as_written(tmp_path: Path) -> None:
    here = _scratch(tmp_path)
    env = {**os.environ, "CHAOS_HOME": str(tmp_path / ".chaos-home")}
    local = [c for c in commands() if not c.cluster]
    assert any("--provisioner sim" in c.line for c in local) and any("replay" in c.line for c in local)
    for c in local:
        res = subprocess.run(["bash", "-c", c.line], cwd=here, env=env, capture_output=True, text=True,
                             timeout=900)
        assert res.returncode == c.expected_exit, (
            f"`{c.line}` exited {res.returncode}, the README says {c.expected_exit}:\n"
            f"{res.stdout[-1500:]}\n{res.stderr[-1500:]}")
