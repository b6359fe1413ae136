"""`chaos systems [SYSTEM]`: the systems under test a run can name, and what each declares.

Read from the declarations themselves (`kernel.system.SystemDecl`), so what it shows is what the
harness acts on: the processes of a node, their roles, ports and capabilities, the Kafka features
the system serves and what it gives beyond the Kafka protocol.
"""

from __future__ import annotations

import click

#: how `chaos systems` says where a process placed other than on every node runs
PLACED = {"first": "the first node only", "rest": "every node but the first"}


@click.command()
@click.argument("system", required=False)
@click.option("--build", is_flag=True, help="Build what SYSTEM's containers run on this machine (its image "
              "layer: tansu is built with cargo, about 20 minutes once per machine).")
@click.option("--system-version", default="", help="The version to build or show (tansu: 0.6.0 by default).")
def systems(system: str | None, build: bool, system_version: str) -> int:
    """List the systems under test (or show one: a name, or process:FILE.toml)."""
    import time

    from harness.registry import system_image
    from harness.systems import NAMES, get_system
    from kernel.errors import UsageError

    if build:
        if not system:
            raise UsageError("--build needs a SYSTEM to build (chaos systems tansu --build)")
        t0 = time.monotonic()
        image = system_image(get_system(system, system_version)) or "the node image (make image)"
        click.echo(f"{system}: {image} ready ({time.monotonic() - t0:.0f} s)")
        return 0
    names = [system] if system else [n for n in NAMES if not n.endswith("FILE.toml")]
    for name in names:
        s = get_system(name, system_version if system else "")
        d = s.decl
        click.echo(f"{s.name}: runs on {', '.join(s.backends)}; serves {', '.join(sorted(d.features)) or 'no feature'}"
                   f"; extras: {', '.join(sorted(d.extras)) or 'none'}")
        for p in d.processes:
            click.echo(f"  {p.name:<12} roles {', '.join(p.roles)}; ports {', '.join(map(str, p.ports)) or '-'}; "
                       f"the harness can {', '.join(sorted(p.capabilities)) or 'do nothing to it'}"
                       + ("" if p.placement == "all" else f"; runs on {PLACED[p.placement]}"))
    if not system:
        click.echo("process:FILE.toml: any Kafka-protocol broker a TOML file describes "
                   "(README.md, 'Testing your own broker'; docs/systems/logbroker.toml is an example)")
    return 0
