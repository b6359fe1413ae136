"""Faults: network partitions (iptables), GC-like pauses (SIGSTOP/SIGCONT), clock skew (libfaketime),
kills (SIGKILL + restart) of the controller, leaders or any broker, and operator moves.

A part (docs/design.md, "Layers and imports"): imports the ground floor (`kernel`) only, and acts
on nodes through the capability Protocols of `kernel.capabilities`. Modelled on Jepsen's
`nemesis.combined`: each family is one file with `plan`/`start`/`stop`, an idempotent `heal()` and
its plot metadata (`perf`); `schedule.plan` turns (seed, names, interval, time limit, the cluster's
shape) into a list of planned faults with their targets as values, before anything starts;
`runner.NemesisRunner` plays the plan during a run, writes each fault's start and end into the
history, and always heals. Adding a family is one file plus one line in `registry.py`.
"""

from __future__ import annotations

from nemesis.registry import build, validate

__all__ = ["build", "validate"]
