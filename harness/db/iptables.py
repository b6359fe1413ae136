"""`IptablesNet`: the container backend's `Net` capability — grudges as iptables rules on the nodes.

A dedicated chain `CHAOS` (jumped to from INPUT) holds every rule we add, so healing is flushing
that chain and never touches anything else on the host. A grudge node -> sources becomes, on that
node, DROP rules for packets from each source's address: all of them, or only those to the node's
own `ports` (requests to its services), or only those from the sources' `from_ports` (answers on
connections it opened); with `loss`, iptables' `statistic` match drops that share at random (this
kernel has no netem). Lifting deletes one instance of each rule, so overlapping cuts stay in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kernel import layout
from kernel.capabilities import Cut
from kernel.db import Cluster
from kernel.node import Node
from kernel.remote import Remote

CHAIN = "CHAOS"


def setup_commands() -> str:
    return (f"iptables -N {CHAIN} 2>/dev/null; iptables -C INPUT -j {CHAIN} 2>/dev/null || "
            f"iptables -I INPUT 1 -j {CHAIN}")


def _rule_specs(sources: Iterable[str], ports: Iterable[int], probability: float | None,
                from_ports: Iterable[int] = ()) -> list[str]:
    """One iptables rule body per (source, port): drop, or with `probability` drop that share of
    packets at random (iptables' `statistic` match: packet loss without netem). `ports` are the
    destination ports here (requests to our services); `from_ports` are the source's ports (answers
    to connections we opened: our requests still arrive, their replies do not)."""
    chance = f" -m statistic --mode random --probability {probability:.3f}" if probability is not None else ""
    ports, from_ports = tuple(ports), tuple(from_ports)
    out = []
    for ip in sources:
        if ports or from_ports:
            out += [f"{CHAIN} -s {ip} -p tcp --dport {p}{chance} -j DROP" for p in ports]
            out += [f"{CHAIN} -s {ip} -p tcp --sport {p}{chance} -j DROP" for p in from_ports]
        else:
            out.append(f"{CHAIN} -s {ip}{chance} -j DROP")
    return out


def drop_commands(sources: Iterable[str], ports: Iterable[int] = (), probability: float | None = None,
                  from_ports: Iterable[int] = ()) -> str:
    """Rules on one node: drop packets from each source ip (optionally only to or from some tcp ports)."""
    rules = [f"iptables -A {r}" for r in _rule_specs(sources, ports, probability, from_ports)]
    return " && ".join([setup_commands()] + rules) if rules else setup_commands()


def undrop_commands(sources: Iterable[str], ports: Iterable[int] = (), probability: float | None = None,
                    from_ports: Iterable[int] = ()) -> str:
    """Delete one instance of each rule `drop_commands` added (iptables -D), leaving other faults' rules."""
    rules = [f"iptables -D {r} 2>/dev/null" for r in _rule_specs(sources, ports, probability, from_ports)]
    return "; ".join(rules) + "; true"


def heal_command() -> str:
    return f"iptables -F {CHAIN} 2>/dev/null; true"


class IptablesNet:
    """`Net` over SSH: each cut's rules on the nodes that hold the grudge."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _ips(self) -> dict[str, str]:
        return {n.name: n.ip for n in self.cluster.nodes}

    def _sources(self, node: str, drops: list[str]) -> list[str]:
        """The addresses of `drops` as `node` sees them: the clients' host (`layout.CLIENTS`) is the
        gateway of the node's network, through which the control host's connections arrive."""
        ips = self._ips()
        out = []
        for d in drops:
            if d == layout.CLIENTS:
                got = self.cluster.remotes[node].exec("ip route show default | awk '{print $3; exit}'", timeout=30)
                out.append(got.stdout.strip())
            else:
                out.append(ips[d])
        return out

    def drop(self, cut: Cut) -> None:
        for node, drops in cut.grudge.items():
            if drops:
                cmd = drop_commands(self._sources(node, list(drops)), cut.ports, cut.loss, cut.from_ports)
                self.cluster.remotes[node].exec(cmd, timeout=30)

    def lift(self, cut: Cut) -> None:
        for node, drops in cut.grudge.items():
            if drops:
                cmd = undrop_commands(self._sources(node, list(drops)), cut.ports, cut.loss, cut.from_ports)
                self.cluster.remotes[node].exec(cmd, timeout=30, check=False)

    def heal_net(self) -> None:
        for n in self.cluster.nodes:
            self.cluster.remotes[n.name].exec(heal_command(), timeout=30, check=False)


class IptablesCapability:
    """`Net` for a deployment that holds its `nodes` and their `remotes` (a mixin over `IptablesNet`)."""

    nodes: list[Node]
    remotes: Mapping[str, Remote]

    def _net(self) -> IptablesNet:
        return IptablesNet(Cluster(self.nodes, self.remotes))

    def drop(self, cut: Cut) -> None:
        self._net().drop(cut)

    def lift(self, cut: Cut) -> None:
        self._net().lift(cut)

    def heal_net(self) -> None:
        self._net().heal_net()
