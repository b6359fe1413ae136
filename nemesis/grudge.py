"""Grudges, as in Jepsen: node -> the nodes it drops packets from. Pure functions; the `Net`
capability of each backend installs them (`harness/db/iptables.py` in containers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Grudge = dict[str, list[str]]


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


def describe(g: Mapping[str, list[str]]) -> dict[str, list[str]]:
    return {k: list(v) for k, v in sorted(g.items()) if v}
