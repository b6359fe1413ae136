"""Clock skew with libfaketime: the broker reads the node's offset file on every clock call.

`bump` steps the wall clock of some nodes by ± seconds (Jepsen uses ~10 ms to ~5 min), as an NTP
step would; `strobe` flips it back and forth while the fault lasts; `reset` puts every node back
to +0 (as a scheduled event of its own, Jepsen's clock-reset); stopping any of them resets its own
nodes to +0. The monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC), and the host's
clock never moves.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from kernel import layout
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlannedFault, PlanWorld, Target


def offset_spec(seconds: float) -> str:
    """libfaketime's relative offset syntax for a timestamp file: '+120' / '-0.5'."""
    return f"{seconds:+.3f}".rstrip("0").rstrip(".")


def set_offset(ctx: NemesisContext, node: str, seconds: float) -> None:
    ctx.cluster.remotes[node].exec(f"echo '{offset_spec(seconds)}' > {layout.FAKETIME_FILE}", timeout=15)


class ClockFamily:
    name: str = "clock"
    kinds: tuple[str, ...] = ("bump", "strobe", "reset")
    perf: FaultPerf = FaultPerf("start-clock", "stop-clock", "clock skew", "#A0C8E9")
    composite: bool = False

    def __init__(self) -> None:
        self._strobes: dict[int, tuple[threading.Event, threading.Thread]] = {}

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        k = rng.randint(1, max(1, len(world.nodes) // 2))
        targets = sorted(rng.sample(world.nodes, k))
        magnitude = 10 ** rng.uniform(-2, 2.5)  # 10 ms .. ~5 min, log-uniform like Jepsen's bumps
        seconds = round(magnitude * rng.choice((-1, 1)), 3)
        return Plan({n: Target.of_node(n) for n in targets},
                    {"seconds": seconds, "period_s": round(rng.uniform(0.05, 1.0), 3)})

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        if fault.kind == "reset":
            self._reset_all(ctx)
            return {"kind": "reset", "nodes": sorted(n.name for n in ctx.nodes), "seconds": 0.0}
        nodes = sorted(ctx.resolve(t).node.name for t in fault.targets.values())
        seconds = float(fault.params["seconds"])
        for n in nodes:
            set_offset(ctx, n, seconds)
        if fault.kind == "strobe":
            stop = threading.Event()
            period = float(fault.params["period_s"])

            def flip() -> None:
                on = False
                while not stop.wait(period):
                    for n in nodes:
                        set_offset(ctx, n, seconds if on else 0.0)
                    on = not on

            t = threading.Thread(target=flip, daemon=True, name=f"clock-strobe-{fault.id}")
            self._strobes[fault.id] = (stop, t)
            t.start()
        return {"kind": fault.kind, "nodes": nodes, "seconds": seconds}

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        self._stop_strobe(fault.id)
        for n in started["nodes"]:
            set_offset(ctx, n, 0.0)
        return {"kind": "reset", "nodes": started["nodes"]}

    def _stop_strobe(self, fid: int) -> None:
        item = self._strobes.pop(fid, None)
        if item is not None:
            item[0].set()
            item[1].join(timeout=5)

    def _reset_all(self, ctx: NemesisContext) -> None:
        for fid in list(self._strobes):
            self._stop_strobe(fid)
        for n in ctx.nodes:
            set_offset(ctx, n.name, 0.0)

    def heal(self, ctx: NemesisContext) -> None:
        self._reset_all(ctx)
