"""`chaos nemeses`: every fault family and kind, one line each, as `--nemesis` names them.

Read from the families themselves (`nemesis.registry.catalogue`: each family's module docstring and
its `about` table), so a new family or kind shows here the moment it is registered.
"""

from __future__ import annotations

import click


@click.command()
@click.option("--system", "system", default=None,
              help="Mark the kinds this system under test cannot take (a name, or process:FILE.toml).")
def nemeses(system: str | None) -> int:
    """List every fault family and kind with one line of what it does (names for --nemesis)."""
    from harness.registry import kind_refusals
    from nemesis.registry import ALL, catalogue

    refused = kind_refusals(system) if system is not None else {}
    fams = catalogue()
    width = max(len(f"{f.name}-{k}") for f in fams for k in f.kinds)
    click.echo(f"--nemesis takes a family (any of its kinds), a family-kind, or {ALL!r} (every kind the system "
               "under test can take, the default).")
    if system is not None:
        click.echo(f"Kinds marked 'no' are refused for system {system}, and left out of {ALL!r}.")
    for f in fams:
        click.echo("")
        click.echo(f"{f.name}{' (a composition of steps)' if f.composite else ''}: {f.summary}")
        for kind, line in f.kinds.items():
            why = refused.get(f"{f.name}-{kind}")
            mark = "" if system is None else ("no   " if why else "yes  ")
            click.echo(f"  {mark}{f'{f.name}-{kind}':<{width}}  {line}")
    return 0
