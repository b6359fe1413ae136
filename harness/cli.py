"""The `chaos` command line.

Sub-commands live next to what they drive and are imported only when used, so `chaos --help` is
fast and a broken optional part (Spark, Docker) cannot stop the others. To add one, add a line to
`COMMANDS`. Errors derived from `ChaosError` become one sentence on stderr and their exit code.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from harness.errors import ChaosError

#: command name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "cluster": "harness.cluster_cli:cluster",
    "check": "results.cli:check",
    "heal": "nemesis.cli:heal",
    "run": "harness.run_cli:run",
    "replay": "harness.run_cli:replay",
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        cmd: click.Command = getattr(importlib.import_module(module), attr)
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="chaos-harness")
def cli() -> None:
    """Chaos-test a Kafka-like replicated log: provision, fault, record, check, report."""


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry. A command returns its exit code (an int) or None for 0;
    ChaosError -> one line on stderr and its exit code; click usage errors exit 3 (2 means unknown)."""
    try:
        rv = cli.main(args=argv, standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except ChaosError as e:
        click.echo(f"chaos: {e}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("chaos: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(3 if e.exit_code == 2 else e.exit_code)


if __name__ == "__main__":
    main()
