"""Faults: network partitions (iptables), GC-like pauses (SIGSTOP/SIGCONT), clock skew (libfaketime),
and kills (SIGKILL + restart) of the controller, leaders or any broker.

Modelled on Jepsen's `nemesis.combined`: each family is one file with `start(fault)`/`stop(fault)`
and an idempotent `heal()`; `schedule.plan` turns (seed, names, interval, time limit, node names)
into a list of planned faults as plain data, before anything starts; `runner.NemesisRunner` plays
the plan during a run, writes each fault's start and end into the history, and always heals.
Entry points for `chaos run`: `validate(names, provisioner)`, `build(...)`.
May import `harness` (nodes, Remote, DB, history); nothing imports it but the harness's run.
"""

from __future__ import annotations

from nemesis.registry import build, validate

__all__ = ["build", "validate"]
