"""Workloads by name (one line each)."""

from __future__ import annotations

from harness.errors import UsageError

WORKLOADS = {"queue": "workloads.queue"}


def check_workload(name: str) -> None:
    if name not in WORKLOADS:
        raise UsageError(f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}")
