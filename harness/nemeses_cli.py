"""`chaos nemeses`: every fault family and kind, one line each, as `--nemesis` names them.

Read from the families themselves (`nemesis.registry.catalogue`: each family's module docstring and
its `about` table), so a new family or kind shows here the moment it is registered.
"""

from __future__ import annotations

import click


@click.command()
def nemeses() -> int:
    """List every fault family and kind with one line of what it does (names for --nemesis)."""
    from nemesis.registry import ALL, catalogue

    fams = catalogue()
    width = max(len(f"{f.name}-{k}") for f in fams for k in f.kinds)
    click.echo(f"--nemesis takes a family (any of its kinds), a family-kind, or {ALL!r} (every family, the default).")
    for f in fams:
        click.echo("")
        click.echo(f"{f.name}{' (a composition of steps)' if f.composite else ''}: {f.summary}")
        for kind, line in f.kinds.items():
            click.echo(f"  {f'{f.name}-{kind}':<{width}}  {line}")
    return 0
