"""Workloads by name (one line each)."""

from __future__ import annotations

from kernel.errors import UsageError
from kernel.workload import Workload
from workloads import hotkey, queue, txn

WORKLOADS: dict[str, Workload] = {
    "queue": queue.WORKLOAD,
    "hotkey": hotkey.WORKLOAD,
    "txn": txn.WORKLOAD,
}


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise UsageError(f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}")
    return WORKLOADS[name]
