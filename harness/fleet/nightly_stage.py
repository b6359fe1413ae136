"""A nightly's sim-search stage: part of the night's budget spent on the simulator, which finds in
seconds bugs a container mix may never hit (`make bench-sim`).

In the plan (nightly.toml):

    [sim]                         # optional; without it the night is container runs only
    budget_minutes = 4            # wall time for the search, shared by its mixes (shrinking may add as much)
    mixes = { full = [], kills = ["kill", "power-loss"] }   # name = fault families; [] = the simulator's full mix
    # or name = { nemesis = [...], workload = "txn", time_limit = 30, nemesis_interval = 5, share = 2 }:
    # a mix's own workload, seed length and fault spacing, and its weight in the budget (default 1)
    rates = [20, 100]             # ops/s the seeds take turns at
    time_limit = 60               # simulated seconds per seed
    nemesis_interval = 10         # simulated seconds between faults
    first_seed = 1
    nodes = 3
    bugs = []                     # bug switches (a canary stage)
    jobs = 2                      # processes on this host; ignored with spark_master
    shrink = true                 # shrink a failing seed's schedule before saving it
    spark_master = "local[2]"     # optional: seeds as Spark tasks (else the night's --spark-master, if any,
                                  # judges the batches and --jobs runs the seeds)

Each mix is one case of the night: valid when its seeds ran clean, invalid when one failed — its
schedule shrunk, saved as a normal run and checked, so the case carries `chaos replay RUN`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel.errors import EXIT_INTERNAL, EXIT_INVALID, UsageError
from kernel.spec import RunSpec, build_spec

KEYS = {"budget_minutes", "mixes", "rates", "time_limit", "nemesis_interval", "first_seed", "nodes", "bugs", "jobs",
        "spark_master", "check_batch", "shrink"}


#: what a mix's table may set of its seeds' spec, beside its fault families and workload
MIX_SETTINGS = ("time_limit", "nemesis_interval")


@dataclass(frozen=True)
class Mix:
    """One mix of the stage as the plan gives it.

    Why a mix may set its own seed length, fault spacing and budget weight: the switches' scenarios
    differ in what they need. The transactional one (markers held back from a leader that then
    dies) needs many short seeds with faults close together: with the stage's 60 s seeds and a fault
    every 10 s, the sample night's txn mix never reached `truncation-reopens-transaction`, and with
    short seeds and close faults a night did (docs/measurements/coverage.md, "2026-11-29: a night of
    the sample plan, twice" and "2026-11-29: a third night of the sample plan"), while the full mix
    needs the long seeds."""

    families: list[str]
    workload: str | None = None
    settings: dict[str, float] = field(default_factory=dict)  # time_limit / nemesis_interval of its seeds
    share: float = 1.0


@dataclass(frozen=True)
class SimStage:
    budget_s: float
    mixes: dict[str, Mix]
    rates: tuple[float, ...]
    first_seed: int
    jobs: int
    check_batch: int
    spark_master: str | None
    bases: dict[str, RunSpec]  # per mix: the search's base spec (every name checked)
    shrink: bool = True

    def share_s(self, mix: str) -> float:
        """The wall time of `mix`'s search: the budget split by the mixes' weights (`Mix.share`)."""
        return self.budget_s * self.mixes[mix].share / sum(m.share for m in self.mixes.values())


def sim_stage_from(data: Any, store: str) -> SimStage:
    """The `[sim]` table, checked before the night starts."""
    from harness.options import parse_rates
    from harness.registry import build_test

    if not isinstance(data, dict):
        raise UsageError(f"nightly [sim] must be a table, not {type(data).__name__}")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise UsageError(f"unknown [sim] setting(s): {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}")
    budget = float(data.get("budget_minutes", 5)) * 60
    if not 0 < budget <= 86400:
        raise UsageError("[sim] budget_minutes must be between 0 and a day")
    mixes = {name: _mix(name, v) for name, v in _table(data.get("mixes", {"full": []})).items()}
    rates = parse_rates(",".join(str(r) for r in data.get("rates", [20, 100])))
    ints = {k: data.get(k, d) for k, d in (("first_seed", 1), ("jobs", 2), ("check_batch", 32), ("nodes", 3))}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints.values()) or ints["jobs"] < 1:
        raise UsageError(f"[sim] first_seed, jobs, check_batch and nodes must be whole numbers, not {ints}")
    if not isinstance(data.get("shrink", True), bool):
        raise UsageError("[sim] shrink must be true or false")
    master = data.get("spark_master")
    if master is not None:
        from results.spark import check_master

        check_master(str(master))
    bases = {}
    for name, mix in mixes.items():
        values: dict[str, Any] = {"provisioner": "sim", "nodes": ints["nodes"],
                                  "time_limit": data.get("time_limit", 60), "rate": rates[0],
                                  "nemesis_interval": data.get("nemesis_interval", 10),
                                  "bugs": list(data.get("bugs", [])), "store": store, "name": f"sim-{name}",
                                  **mix.settings}
        if mix.families:
            values["nemesis"] = mix.families
        if mix.workload is not None:
            values["workload"] = mix.workload
        bases[name] = build_test(build_spec(values)).spec
    return SimStage(budget, mixes, rates, ints["first_seed"], ints["jobs"], ints["check_batch"],
                    None if master is None else str(master), bases, bool(data.get("shrink", True)))


MIX_FORM = ("[sim] mixes must be a table of name = [fault families] ([] = the simulator's full mix), or "
            "name = { nemesis = [fault families], workload = \"txn\", time_limit = 30, nemesis_interval = 5, "
            "share = 2 } (every key optional)")
def _table(mixes: Any) -> dict[str, Any]:
    if not isinstance(mixes, dict) or not mixes:
        raise UsageError(MIX_FORM)
    return mixes


def _mix(name: str, value: Any) -> Mix:
    """One mix: its fault families, and what it sets for itself (a transactional mix is what
    reaches the transaction switches' probes)."""
    if not isinstance(value, dict):
        value = {"nemesis": value}
    unknown = sorted(set(value) - {"nemesis", "workload", "share", *MIX_SETTINGS})
    workload = value.get("workload")
    if unknown or (workload is not None and not isinstance(workload, str)):
        raise UsageError(f"[sim] mix {name}: {MIX_FORM}")
    families = value.get("nemesis", [])
    if not isinstance(families, list) or not all(isinstance(x, str) for x in families):
        raise UsageError(f"[sim] mix {name}: {MIX_FORM}")
    numbers = {k: value[k] for k in (*MIX_SETTINGS, "share") if k in value}
    for k, v in numbers.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < float("inf"):
            raise UsageError(f"[sim] mix {name}: {k} must be a positive number, not {v!r}")
    share = float(numbers.pop("share", 1.0))
    return Mix(families, workload, {k: float(v) for k, v in numbers.items()}, share)


@dataclass
class SimCase:
    """What one mix's search came to, for the night's summary and JUnit file."""

    mix: str
    base: RunSpec
    outcome: str  # valid | invalid | crashed
    seconds: float
    seeds: int
    message: str
    anomalies: list[str]
    run_dir: Path | None
    exit_code: int
    probes: dict[str, int] = field(default_factory=dict)  # probe -> seeds of the search whose run hit it


def run_sim_stage(stage: SimStage, *, spark_master: str | None, say: Callable[[str], None]) -> list[SimCase]:
    """Each mix's search in its share of the budget; a failing seed shrunk, saved and checked."""
    from harness.fleet.hunt import hunt, save_found

    master = stage.spark_master or spark_master
    cases = []
    for mix, base in stage.bases.items():
        share = stage.share_s(mix)
        t0 = time.monotonic()
        tag = f"sim/{mix}"
        say(f"{tag}: searching for {share:.0f} s from seed {stage.first_seed}")

        def said(line: str, tag: str = tag) -> None:
            say(f"{tag}: {line}")

        try:
            out = hunt(base, first_seed=stage.first_seed, budget_s=share, jobs=stage.jobs, spark_master=master,
                       fleet=stage.spark_master is not None, say=said,
                       store=Path(base.store), check_batch=stage.check_batch, rates=stage.rates,
                       shrink_found=stage.shrink)
            if out.found is None:
                msg = f"{out.seeds} seeds from {stage.first_seed} clean ({out.sim_seconds:.0f} simulated s)"
                case = SimCase(mix, base, "valid", time.monotonic() - t0, out.seeds, msg, [], None, 0, out.hits)
            else:
                run_dir = save_found(base, out, stage.rates, master, say, check=True)
                msg = (f"seed {out.found.seed} failed after {out.seeds} seeds; schedule shrunk from "
                       f"{len(out.found.faults)} to {len(out.shrunk)} faults")
                case = SimCase(mix, base, "invalid", time.monotonic() - t0, out.seeds, msg,
                               sorted(out.found.anomalies), run_dir, EXIT_INVALID, out.hits)
        except Exception as e:  # one mix's crash must not lose the rest of the night
            case = SimCase(mix, base, "crashed", time.monotonic() - t0, 0, f"{type(e).__name__}: {e}", [], None,
                           EXIT_INTERNAL)
        say(f"{tag}: {case.outcome.upper()}: {case.message}"
            + (f"; reproduce with: chaos replay {case.run_dir}" if case.run_dir else ""))
        cases.append(case)
    return cases


def entries_of(cases: list[SimCase], stage: SimStage) -> list[Any]:
    """The stage's cases as the night's entries (one per mix; `kind` "sim")."""
    from harness.night_cells import Cell, Entry

    return [Entry(Cell(c.base.workload, c.mix, "sim-search", stage.first_seed, c.base), c.outcome, c.run_dir,
                  c.seconds, c.anomalies, c.message, c.exit_code, kind="sim", probes=c.probes) for c in cases]

