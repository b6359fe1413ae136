"""`chaos systems [SYSTEM]`: the systems under test a run can name, and what each declares.

Read from the declarations themselves (`kernel.system.SystemDecl`), so what it shows is what the
harness acts on: the processes of a node, their roles, ports and capabilities, the Kafka features
the system serves and what it gives beyond the Kafka protocol.
"""

from __future__ import annotations

import click


@click.command()
@click.argument("system", required=False)
def systems(system: str | None) -> int:
    """List the systems under test (or show one: a name, or process:FILE.toml)."""
    from harness.systems import NAMES, get_system

    names = [system] if system else [n for n in NAMES if not n.endswith("FILE.toml")]
    for name in names:
        s = get_system(name)
        d = s.decl
        click.echo(f"{s.name}: runs on {', '.join(s.backends)}; serves {', '.join(sorted(d.features)) or 'no feature'}"
                   f"; extras: {', '.join(sorted(d.extras)) or 'none'}")
        for p in d.processes:
            click.echo(f"  {p.name:<12} roles {', '.join(p.roles)}; ports {', '.join(map(str, p.ports)) or '-'}; "
                       f"the harness can {', '.join(sorted(p.capabilities)) or 'do nothing to it'}")
    if not system:
        click.echo("process:FILE.toml: any Kafka-protocol broker a TOML file describes "
                   "(README.md, 'Testing your own broker'; docs/systems/logbroker.toml is an example)")
    return 0
