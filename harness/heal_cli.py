"""`chaos heal`: heal every fault on a running cluster by hand (partitions, pauses, clocks, kills)."""

from __future__ import annotations

import click

from kernel.errors import UsageError


@click.command()
@click.option("--name", default="chaos", show_default=True, help="Cluster name.")
def heal(name: str) -> int:
    """Flush our iptables chain, SIGCONT paused processes, reset clocks, restart killed brokers."""
    from harness.provision import get_provisioner
    from harness.provision.state import ClusterState
    from harness.registry import make_db
    from kernel.nemesis import NemesisContext
    from kernel.spec import RunSpec
    from nemesis import build

    loaded = ClusterState(name).load()
    if not loaded:
        raise UsageError(f"cluster {name!r} is not up")
    kind, nodes = loaded
    cluster = get_provisioner(kind, name).connect(nodes)
    db = make_db(RunSpec()).attach(cluster)
    try:
        ctx = NemesisContext(cluster, db)
        for fam in build(["partition", "pause", "clock"]).values():
            fam.heal(ctx)
        # restart brokers only where a broker was deployed (a config file exists)
        for n in nodes:
            if cluster.remotes[n.name].exec("test -f /etc/chaos/broker.properties", check=False).ok:
                db.start(n)
    finally:
        db.close()
        for r in cluster.remotes.values():
            r.close()
    click.echo(f"healed {len(nodes)} nodes of cluster {name!r}")
    return 0
