"""Clock skew with libfaketime: the broker reads the node's offset file on every clock call.

`bump` steps the wall clock of some nodes by ± seconds (Jepsen uses ~10 ms to ~5 min), as an NTP
step would; `strobe` flips it back and forth while the fault lasts; `reset` puts every node back
to +0 (as a scheduled event of its own, Jepsen's clock-reset); stopping any of them resets to +0. The
monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC), and the host's clock never moves.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from harness import layout
from nemesis.model import NemesisContext, PlannedFault


def offset_spec(seconds: float) -> str:
    """libfaketime's relative offset syntax for a timestamp file: '+120' / '-0.5'."""
    return f"{seconds:+.3f}".rstrip("0").rstrip(".")


def set_offset(ctx: NemesisContext, node: str, seconds: float) -> None:
    ctx.remotes[node].exec(f"echo '{offset_spec(seconds)}' > {layout.FAKETIME_FILE}", timeout=15)


class ClockFamily:
    name = "clock"
    kinds = ("bump", "strobe", "reset")

    def __init__(self) -> None:
        self._strobe_stop = threading.Event()
        self._strobe: threading.Thread | None = None

    def plan_params(self, kind: str, rng: random.Random, node_names: list[str]) -> dict[str, Any]:
        k = rng.randint(1, max(1, len(node_names) // 2))
        targets = sorted(rng.sample(node_names, k))
        magnitude = 10 ** rng.uniform(-2, 2.5)  # 10 ms .. ~5 min, log-uniform like Jepsen's bumps
        return {"nodes": targets, "seconds": round(magnitude * rng.choice((-1, 1)), 3),
                "period_s": round(rng.uniform(0.05, 1.0), 3)}

    def start(self, ctx: NemesisContext, fault: PlannedFault) -> dict[str, Any]:
        if fault.kind == "reset":
            self.heal(ctx)
            return {"kind": "reset", "nodes": sorted(n.name for n in ctx.nodes), "seconds": 0.0}
        nodes, seconds = list(fault.params["nodes"]), float(fault.params["seconds"])
        for n in nodes:
            set_offset(ctx, n, seconds)
        if fault.kind == "strobe":
            self._strobe_stop.clear()
            period = float(fault.params["period_s"])

            def flip() -> None:
                on = False
                while not self._strobe_stop.wait(period):
                    for n in nodes:
                        set_offset(ctx, n, seconds if on else 0.0)
                    on = not on

            self._strobe = threading.Thread(target=flip, daemon=True, name="clock-strobe")
            self._strobe.start()
        return {"kind": fault.kind, "nodes": nodes, "seconds": seconds}

    def stop(self, ctx: NemesisContext, fault: PlannedFault, started: dict[str, Any]) -> dict[str, Any]:
        self.heal(ctx)
        return {"kind": "reset", "nodes": started["nodes"]}

    def heal(self, ctx: NemesisContext) -> None:
        self._strobe_stop.set()
        if self._strobe is not None:
            self._strobe.join(timeout=5)
            self._strobe = None
        for n in ctx.nodes:
            set_offset(ctx, n.name, 0.0)
