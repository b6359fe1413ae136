"""`chaos cluster …`: bring nodes up, look at them, run commands on them, tear them down."""

from __future__ import annotations

import shlex
import sys
import time

import click
from rich.console import Console
from rich.table import Table

from harness.options import Finite
from harness.provision import PROVISIONERS, get_provisioner
from harness.provision.state import ClusterState
from harness.ssh import SSHRemote
from kernel.errors import RemoteError, UsageError
from kernel.node import Node

console = Console(stderr=True)

#: What every healthy node has, whatever it runs: each check is (label, command); all run over SSH.
#: The system under test adds its own (`kernel.system.SystemDecl.health`).
HEALTH_CHECKS: list[tuple[str, str]] = [
    ("ssh", "hostname"),
    ("iptables", "iptables -L INPUT -n >/dev/null && echo ok"),
    ("faketime", "/opt/chaos/bin/faketime-run python3 -c 'import time; time.sleep(0.01); print(int(time.time()))'"),
]


def health_checks(system: str) -> list[tuple[str, str]]:
    """The node checks, then what `system` ("" for the default) needs on a node."""
    from harness.systems import get_system

    return [HEALTH_CHECKS[0], *get_system(system).decl.health, *HEALTH_CHECKS[1:]]


def _nodes(cluster: str) -> list[Node]:
    loaded = ClusterState(cluster).load()
    if not loaded or not loaded[1]:
        raise UsageError(f"cluster {cluster!r} is not up; start it with `chaos cluster up`")
    return loaded[1]


def run_health(nodes: list[Node], system: str = "") -> bool:
    """Run the health checks of `system` on every node over SSH; print a table; True if all passed."""
    checks = health_checks(system)
    table = Table("node", *[label for label, _ in checks], title="node health (over SSH)")
    all_ok = True
    for node in nodes:
        cells = []
        with SSHRemote(node) as r:
            for _, cmd in checks:
                try:
                    res = r.exec(cmd, timeout=30, check=False)
                    ok = res.ok and bool(res.stdout.strip())
                    text = res.stdout.strip().splitlines()[0][:24] if ok else (res.stderr.strip() or "failed")[:40]
                except RemoteError as e:
                    ok, text = False, str(e)[:40]
                all_ok &= ok
                cells.append(f"[green]{text}[/]" if ok else f"[red]{text}[/]")
        table.add_row(node.name, *cells)
    console.print(table)
    return all_ok


@click.group()
def cluster() -> None:
    """Bring a cluster of nodes up, inspect it, run commands on it, tear it down."""


@cluster.command()
@click.option("--nodes", "n", type=int, default=None,
              help="How many nodes (n1..nN); docker default 5, ssh default: every host listed.")
@click.option("--name", default="chaos", show_default=True, help="Cluster name (label chaos.cluster=NAME).")
@click.option("--provisioner", default="docker", show_default=True, help=f"One of: {', '.join(PROVISIONERS)}.")
@click.option("--hosts", type=click.Path(), help="ssh provisioner: file with one `[name] address[:port]` per line.")
@click.option("--user", default="root", show_default=True, help="ssh provisioner: login user.")
@click.option("--port", type=int, default=22, show_default=True, help="ssh provisioner: default SSH port.")
@click.option("--key", type=click.Path(), help="ssh provisioner: private key file.")
@click.option("--known-hosts", type=click.Path(), help="ssh provisioner: known_hosts file.")
@click.option("--health/--no-health", default=False, help="Run the SSH health check once the nodes are up.")
@click.option("--system", default="", help="System under test whose node needs the health check adds "
                                           "(default: our broker).")
def up(n: int | None, name: str, provisioner: str, hosts: str | None, user: str, port: int, key: str | None,
       known_hosts: str | None, health: bool, system: str) -> int:
    """Provision NODES nodes and wait until each answers over SSH."""
    if provisioner not in PROVISIONERS:
        raise UsageError(f"unknown provisioner {provisioner!r}; choose one of: {', '.join(PROVISIONERS)}")
    if provisioner == "sim":
        raise UsageError("simulated nodes live only inside a run: use chaos run --provisioner sim")
    if n is not None and n < 1:
        raise UsageError(f"--nodes must be at least 1, not {n}")
    if n is None and provisioner == "docker":
        n = 5
    opts: dict[str, object] = {}
    if provisioner == "ssh":
        opts = {"hosts": hosts, "user": user, "port": port, "key": key, "known_hosts": known_hosts}
    prov = get_provisioner(provisioner, name, **opts)
    t0 = time.monotonic()
    with console.status(f"bringing up {n or 'all'} nodes ({provisioner}) ..."):
        nodes = prov.up(n)  # type: ignore[arg-type]  # ssh: None means every host listed
    console.print(f"cluster [bold]{name}[/]: {len(nodes)} nodes up in {time.monotonic() - t0:.1f} s: "
                  + ", ".join(f"{nd.name}={nd.ip}" for nd in nodes))
    if health and not run_health(nodes, system):
        console.print("[red]health check failed[/]")
        return 5
    if health:
        console.print("health check over SSH passed on every node")
    return 0


@cluster.command(name="health")
@click.option("--name", default="chaos", show_default=True)
@click.option("--system", default=None, help="System under test (default: the one the cluster's last run "
                                             "deployed, else our broker).")
def health_cmd(name: str, system: str | None) -> int:
    """Check every node of a running cluster over SSH."""
    return 0 if run_health(_nodes(name), system if system is not None else ClusterState(name).system() or "") else 5


@cluster.command()
@click.option("--name", default="chaos", show_default=True)
def status(name: str) -> int:
    """Show the nodes of a cluster and whether they answer over SSH."""
    loaded = ClusterState(name).load()
    if not loaded:
        click.echo(f"cluster {name!r} is not up")
        return 0
    kind, nodes = loaded
    table = Table("node", "address", "provisioner", "ssh", title=f"cluster {name}")
    for node in nodes:
        try:
            with SSHRemote(node, connect_timeout=5) as r:
                up_s = r.exec("cat /proc/uptime", timeout=10).stdout.split()[0]
            state = f"[green]up {float(up_s):.0f}s[/]"
        except RemoteError as e:
            state = f"[red]{e}[/]"
        table.add_row(node.name, f"{node.ssh_host}:{node.ssh_port}", kind, state)
    Console().print(table)
    return 0


@cluster.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.option("--name", default="chaos", show_default=True)
@click.option("--timeout", type=Finite(0, 24 * 3600, min_open=True), default=60.0, show_default=True,
              help="seconds the command may take")
@click.argument("node")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_(name: str, timeout: float, node: str, cmd: tuple[str, ...]) -> int:
    """Run CMD on NODE over SSH (`chaos cluster exec n2 -- uname -a`); exits with its status."""
    nodes = {n.name: n for n in _nodes(name)}
    if node not in nodes:
        raise UsageError(f"no node {node!r} in cluster {name!r}; it has {', '.join(nodes)}")
    line = cmd[0] if len(cmd) == 1 else shlex.join(cmd)
    with SSHRemote(nodes[node]) as r:
        res = r.exec(line, timeout=timeout, check=False)
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.exit_status


@cluster.command()
@click.option("--name", default="chaos", show_default=True)
@click.option("--all", "all_", is_flag=True, help="Remove every container and network labelled chaos.cluster.")
def down(name: str, all_: bool) -> int:
    """Tear a cluster down (containers and network; the image stays)."""
    if all_:
        from harness.provision.docker import down_all

        c, n = down_all()
        click.echo(f"removed {c} containers and {n} networks labelled chaos.cluster")
        return 0
    loaded = ClusterState(name).load()
    kind = loaded[0] if loaded else "docker"
    get_provisioner(kind, name).down()
    click.echo(f"cluster {name!r} is down")
    return 0
