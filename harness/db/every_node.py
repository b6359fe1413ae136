"""Doing one thing on every node, where one node's failure must not stop the others (teardown)."""

from __future__ import annotations

from collections.abc import Callable

from kernel.errors import RemoteError
from kernel.node import Node


def on_every_node(nodes: list[Node], fn: Callable[[Node], None], what: str) -> None:
    """`fn(node)` on each node, all of them even when some fail; then one RemoteError naming each failure."""
    errors = []
    for node in nodes:
        try:
            fn(node)
        except RemoteError as e:  # keep going with the others; report after
            errors.append(str(e))
    if errors:
        raise RemoteError("cluster", f"{what} failed on some nodes: " + "; ".join(errors))
