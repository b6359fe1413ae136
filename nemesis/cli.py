"""`chaos heal`: heal every fault on a running cluster by hand (partitions, pauses, clocks, kills)."""

from __future__ import annotations

import click

from harness.errors import UsageError


@click.command()
@click.option("--name", default="chaos", show_default=True, help="Cluster name.")
def heal(name: str) -> int:
    """Flush our iptables chain, SIGCONT paused processes, reset clocks, restart killed brokers."""
    from harness.db.logbroker import LogbrokerDB
    from harness.db.settings import BrokerSettings
    from harness.provision.state import ClusterState
    from harness.ssh import SSHRemote
    from nemesis.model import NemesisContext
    from nemesis.registry import FAMILIES

    loaded = ClusterState(name).load()
    if not loaded:
        raise UsageError(f"cluster {name!r} is not up")
    _, nodes = loaded
    remotes = {n.name: SSHRemote(n) for n in nodes}
    db = LogbrokerDB(nodes, remotes, BrokerSettings())
    ctx = NemesisContext(nodes, remotes, db)
    for fam in ("partition", "pause", "clock"):
        FAMILIES[fam]().heal(ctx)
    # restart brokers only where a broker was deployed (a config file exists)
    for n in nodes:
        if remotes[n.name].exec("test -f /etc/chaos/broker.properties", check=False).ok:
            db.start(n)
    click.echo(f"healed {len(nodes)} nodes of cluster {name!r}")
    return 0
