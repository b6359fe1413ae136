"""Grudges, as in Jepsen: node -> the nodes it drops packets from. Pure functions, then iptables.

A dedicated chain `CHAOS` (jumped to from INPUT) holds every rule we add, so healing is flushing
that chain and never touches anything else on the host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Grudge = dict[str, list[str]]
CHAIN = "CHAOS"


def complete(components: Iterable[Iterable[str]]) -> Grudge:
    """Every node drops every node outside its component (a clean split)."""
    comps = [sorted(c) for c in components]
    everyone = sorted({n for c in comps for n in c})
    return {n: sorted(set(everyone) - set(c)) for c in comps for n in c}


def halves(order: list[str]) -> Grudge:
    """Split into a majority and a minority (order chosen from the seed)."""
    k = len(order) // 2
    return complete([order[:k], order[k:]])


def isolate(node: str, everyone: list[str]) -> Grudge:
    return complete([[node], [n for n in everyone if n != node]])


def one_way(node: str, everyone: list[str]) -> Grudge:
    """`node` drops everything coming in; the others still hear it (an asymmetric partition)."""
    return {node: sorted(n for n in everyone if n != node)}


def bridge(order: list[str]) -> Grudge:
    """Two halves that cannot talk, joined by one node in the middle that sees both (Jepsen's bridge)."""
    mid = len(order) // 2
    left, b, right = order[:mid], order[mid], order[mid + 1 :]
    g: Grudge = {n: sorted(right) for n in left}
    g.update({n: sorted(left) for n in right})
    g[b] = []
    return g


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


def describe(g: Mapping[str, list[str]]) -> dict[str, list[str]]:
    return {k: list(v) for k, v in sorted(g.items()) if v}
