"""`chaos heal`: heal every fault on a running cluster by hand (partitions, pauses, clocks, kills)."""

from __future__ import annotations

import click

from kernel.errors import UsageError


@click.command()
@click.option("--name", default="chaos", show_default=True, help="Cluster name.")
@click.option("--system", "system_name", default=None,
              help="System under test (default: the one the cluster's last run deployed, else logbroker).")
def heal(name: str, system_name: str | None) -> int:
    """Flush our iptables chain, SIGCONT paused processes, reset clocks, restart killed brokers."""
    from harness.provision import get_provisioner
    from harness.provision.state import ClusterState
    from harness.registry import make_db
    from kernel.db import Killable, Pausable
    from kernel.nemesis import NemesisContext
    from kernel.spec import build_spec
    from nemesis import build

    state = ClusterState(name)
    loaded = state.load()
    if not loaded:
        raise UsageError(f"cluster {name!r} is not up")
    kind, nodes = loaded
    spec = build_spec({"system": system_name or state.system() or "", "cluster": name})
    db = make_db(spec)
    cluster = get_provisioner(kind, name).connect(nodes)
    db.attach(cluster)
    try:
        ctx = NemesisContext(cluster, db)
        fams = ["partition"] + (["pause"] if isinstance(db, Pausable) else []) + (["clock"] if "clock" in {
            c for p in db.system.processes for c in p.capabilities} else [])
        for fam in build(fams).values():
            fam.heal(ctx)
        # restart brokers only where one was deployed (`deployed` says so: a config file exists)
        deployed = getattr(db, "deployed", None)
        if isinstance(db, Killable) and deployed is not None:
            for n in nodes:
                if deployed(n):
                    db.start(n)
    finally:
        db.close()
        for r in cluster.remotes.values():
            r.close()
    click.echo(f"healed {len(nodes)} nodes of cluster {name!r}")
    return 0
