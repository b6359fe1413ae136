"""`python -m harness.image build [--force]`: build the node image if it is missing or stale."""

from __future__ import annotations

import sys

import click

from harness.image.build import ensure_node_image
from kernel.errors import ChaosError


@click.group()
def main() -> None:
    """Node image tools."""


@main.command()
@click.option("--force", is_flag=True, help="Rebuild the node layer even if the cached one matches.")
def build(force: bool) -> None:
    """Build the node image (cached by a content hash label)."""
    try:
        img = ensure_node_image(force=force)
    except ChaosError as e:
        click.echo(f"chaos: {e}", err=True)
        sys.exit(e.exit_code)
    how = "cached" if img.cached else f"built in {img.seconds:.1f} s"
    click.echo(f"node image {img.tag} ({img.id[7:19]}) {how}")


if __name__ == "__main__":
    main()
