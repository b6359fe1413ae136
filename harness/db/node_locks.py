"""One lock per node, so that two faults acting on one node's processes at the same moment take
turns. Faults run in threads of their own on containers and may overlap: two kills of one leader
that end together both restart it, and without a turn each found no process, each started one, the
second removed the first's pid file and died on the port the first held — leaving a broker no pid
file names, which no later kill could stop. A check-then-start is one step only under the lock."""

from __future__ import annotations

import threading

from kernel.node import Node


class NodeLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.RLock] = {}

    def of(self, node: Node) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(node.name, threading.RLock())
