"""`python -m harness.bench.coverage --seeds N --out bench-results/coverage.json`: guided versus plain
sim-search from the same first seed — how many seeds (and how much wall time) each needs until every
probe either of them reached is hit — and the per-probe hit counts of the plain seeds (coverage of N
simulated seeds of the mix: hit / never hit per probe).

A measurement, not a test: it prints and writes numbers and asserts nothing."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from harness.coverage_guide import CoverageGuide
from harness.registry import build_test
from harness.sim_search import SearchOutcome, search
from kernel.spec import build_spec


def _until_all(out: SearchOutcome, reachable: set[str]) -> int | None:
    """Seeds simulated until the last of `reachable` was hit (None: some never were)."""
    if not reachable <= set(out.first_hit):
        return None
    return max((out.first_hit[p] for p in reachable), default=0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--plain-seeds", type=int, default=None,
                    help="seeds of the plain search (default --seeds): more than the guided search's, so a "
                         "plain search that needs several times as many seeds is measured, not cut off")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nemesis", default=None, help="fault families (default: the simulator's whole mix)")
    ap.add_argument("--out", type=Path, default=Path("bench-results/coverage.json"))
    args = ap.parse_args(argv)
    values: dict[str, Any] = {"provisioner": "sim", "nodes": 3, "time_limit": args.time_limit, "rate": 20.0,
                              "nemesis_interval": 5.0, "name": "coverage-bench"}
    if args.nemesis:
        values["nemesis"] = args.nemesis
    base = build_test(build_spec(values)).spec
    runs: dict[str, tuple[SearchOutcome, float]] = {}
    failures: dict[str, list[dict[str, Any]]] = {}
    for mode in ("plain", "guided"):
        guide = CoverageGuide(args.first_seed, args.time_limit) if mode == "guided" else None
        seeds = args.plain_seeds if mode == "plain" and args.plain_seeds else args.seeds
        t0 = time.monotonic()
        failed: list[dict[str, Any]] = []

        def seen(sim: Any, failed: list[dict[str, Any]] = failed) -> None:
            if sim.screened:  # a failing seed (or mutant) is a finding, not the end of the measurement
                failed.append({"seed": sim.seed, "anomalies": sim.screened, "faults": sim.faults})

        out = search(base, first_seed=args.first_seed, budget_s=10**9, jobs=args.jobs, say=lambda _s: None,
                     max_seeds=seeds, shrink_found=False, check_batch=0, guide=guide, keep_going=True, on_seed=seen)
        runs[mode] = (out, time.monotonic() - t0)
        failures[mode] = failed
        print(f"{mode}: {out.seeds} seeds in {runs[mode][1]:.0f} s, {len(out.first_hit)} probes hit, "
              f"{len(failed)} failing" + "".join(f"; seed {f['seed']}: {f['anomalies']}" for f in failed), flush=True)
    reachable = set(runs["plain"][0].first_hit) | set(runs["guided"][0].first_hit)
    result: dict[str, Any] = {"seeds_guided": args.seeds, "seeds_plain": args.plain_seeds or args.seeds,
                              "first_seed": args.first_seed, "time_limit_s": args.time_limit,
                              "nemesis": list(base.nemesis), "reachable": sorted(reachable)}
    for mode, (out, wall) in runs.items():
        n = _until_all(out, reachable)
        result[mode] = {"seeds": out.seeds, "wall_s": round(wall, 1), "probes_hit": len(out.first_hit),
                        "seeds_until_all_reachable": n,
                        "wall_s_until_all_reachable": None if n is None else round(wall * n / max(out.seeds, 1), 1),
                        "first_hit": dict(sorted(out.first_hit.items())), "failing": failures[mode]}
    plain, guided = (result[m]["seeds_until_all_reachable"] for m in ("plain", "guided"))
    result["ratio_plain_to_guided_seeds"] = round(plain / guided, 2) if plain and guided else None
    # the plain search never got there within its seeds: the ratio is at least this (a bound, not a value)
    result["ratio_at_least"] = (round(runs["plain"][0].seeds / guided, 2) if guided and plain is None
                                else result["ratio_plain_to_guided_seeds"])
    both = set(runs["plain"][0].first_hit) & set(runs["guided"][0].first_hit)
    result["both_reached"] = {m: _until_all(runs[m][0], both) for m in ("plain", "guided")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({m: {k: v for k, v in result[m].items() if k != "first_hit"} for m in ("plain", "guided")}))

    def said(mode: str, n: int | None) -> str:
        return str(n) if n is not None else f"not within {runs[mode][0].seeds}"

    print(f"seeds until every reachable probe ({len(reachable)}) was hit: plain {said('plain', plain)}, "
          f"guided {said('guided', guided)}, ratio {result['ratio_plain_to_guided_seeds']} "
          f"(at least {result['ratio_at_least']}); until the {len(both)} probes both reached: "
          f"plain {result['both_reached']['plain']}, guided {result['both_reached']['guided']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
