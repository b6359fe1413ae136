"""`report.html` for one run: what a person opens first.

In order: the verdict; how to reproduce it (the exact `chaos replay` command); every anomaly with
its examples, each linking to an evidence page (`anomalies/<type>.html`) that shows the history
lines (op and its invoke) and the replica-dump records the example names; the four plots; the
failover table; the fault schedule as planned; configuration, seed, git revision, image and phase
timings; links to the raw files and the nodes' logs. Static files only, relative links, no scripts:
it reads the same from disk, from `chaos serve`, or from a CI artifact. This module gathers the facts;
the markup is `templates/report.html` and `templates/evidence.html` (see `results/pages.py`).

The evidence pages come from one streaming pass over the history through `kernel.history.read_ops`
(the one reader) that keeps only the ops the examples name, so a big history costs one read.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from kernel.history import NEMESIS, Op, OpType, read_ops
from results.index import run_faults, verdict_of
from results.pages import render, write_page
from results.perf import fault_name
from results.plots import PLOTS, RunPerf, failover_table

MAX_EXAMPLES = 8
MAX_ROWS = 40
PLOT_ALT = {
    "availability.png": "availability per second, per op kind, with fault windows shaded",
    "latency-raw.png": "latency of every op over time",
    "latency-quantiles.png": "latency quantiles per time window",
    "rate.png": "ops per second by kind and outcome",
}


def _read(path: Path) -> dict[str, Any] | None:
    try:
        d = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def _num(x: Any, fmt: str = "{:.2f}") -> str:
    return fmt.format(x) if isinstance(x, int | float) else "-"


def example_indices(example: dict[str, Any]) -> list[int]:
    """Op indices an anomaly example points at: `index`, `*_index`, `seen_by` entries `send@N`, and the
    ops of a dependency cycle (`cycle`)."""
    out: list[int] = [i for i in example.get("cycle") or [] if isinstance(i, int) and not isinstance(i, bool)]
    for k, v in example.items():
        if (k == "index" or k.endswith("_index")) and isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
    for s in example.get("seen_by") or []:
        if isinstance(s, str) and "@" in s:
            tail = s.rsplit("@", 1)[1]
            if tail.isdigit():
                out.append(int(tail))
    return sorted(set(out))


def example_offsets(example: dict[str, Any]) -> set[int]:
    out: set[int] = set()
    for k in ("offset", "prev_offset", "first_offset", "last_offset"):
        if isinstance(example.get(k), int):
            out.add(example[k])
    for k in ("offsets",):
        out.update(x for x in example.get(k) or [] if isinstance(x, int))
    return out


def example_values(example: dict[str, Any]) -> set[str]:
    vals = [example.get("value"), *(example.get("values") or [])]
    vals += [r.get("value") for r in example.get("replicas") or [] if isinstance(r, dict)]
    return {str(v) for v in vals if isinstance(v, int | str) and not isinstance(v, bool)}


def collect_ops(history: Path, wanted: set[int]) -> dict[int, list[Op]]:
    """For each wanted op index: that op, preceded by its invoke when it is a completion."""
    out: dict[int, list[Op]] = {}
    if not wanted or not history.is_file():
        return out
    last_invoke: dict[str, Op] = {}
    for op in read_ops(history):
        proc = str(op.process)
        if op.index in wanted:
            inv = last_invoke.get(proc)
            out[op.index] = [inv, op] if op.type is not OpType.INVOKE and inv is not None and op.process != NEMESIS \
                else [op]
        if op.type is OpType.INVOKE:
            last_invoke[proc] = op
    return out


def replica_rows(run_dir: Path, topic: str, key: int, offsets: set[int], values: set[str]) -> list[tuple[str, str]]:
    """(file relative to the run, raw line) of every dumped record of `key` at one of `offsets` or
    holding one of `values`, on every node."""
    rows: list[tuple[str, str]] = []
    for f in sorted((run_dir / "replicas").glob(f"*/{topic}-{key}.jsonl")):
        try:
            lines = f.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or "offset" not in rec:
                continue
            if rec.get("offset") in offsets or str(rec.get("value")) in values:
                rows.append((os.path.relpath(f, run_dir), line))
    return rows[:MAX_ROWS]


def _replica_files(run_dir: Path, topic: str, key: Any) -> list[Path]:
    if not isinstance(key, int):
        return []
    return sorted((run_dir / "replicas").glob(f"*/{topic}-{key}.jsonl"))


def _anomaly_types(results: dict[str, Any]) -> list[str]:
    return [t for t in results.get("error_types", []) if isinstance(results.get(t), dict)]


def _evidence_example(n: int, ex: dict[str, Any], ops: dict[int, list[Op]], run_dir: Path,
                      topic: str) -> dict[str, Any]:
    """One example of an evidence page: its JSON, the history lines it names, the replica records."""
    lines = []
    for i in example_indices(ex):
        lines += [{"index": op.index, "named": op.index == i, "line": json.dumps(op.to_json(), default=str)}
                  for op in ops.get(i, [])]
        if i not in ops:
            lines.append({"index": i, "named": True, "line": None})
    key = ex.get("key")
    if not isinstance(key, int) or isinstance(key, bool):
        return {"n": n, "json": json.dumps(ex, default=str), "ops": lines, "key": None, "replica_files": [],
                "replica_rows": []}
    return {
        "n": n, "json": json.dumps(ex, default=str), "ops": lines, "key": key,
        "replica_files": [os.path.relpath(f, run_dir) for f in _replica_files(run_dir, topic, key)],
        "replica_rows": replica_rows(run_dir, topic, key, example_offsets(ex), example_values(ex)),
    }


def write_evidence(run_dir: Path, results: dict[str, Any], topic: str) -> dict[str, str]:
    """One page per anomaly type under `anomalies/`; returns type -> page path relative to the run."""
    types = _anomaly_types(results)
    wanted: set[int] = set()
    for t in types:
        for ex in results[t].get("examples", [])[:MAX_EXAMPLES]:
            if isinstance(ex, dict):
                wanted.update(example_indices(ex))
    ops = collect_ops(run_dir / "history.jsonl", wanted)
    pages: dict[str, str] = {}
    for t in types:
        examples = [_evidence_example(n, ex, ops, run_dir, topic)
                    for n, ex in enumerate(results[t].get("examples", [])[:MAX_EXAMPLES]) if isinstance(ex, dict)]
        path = write_page(run_dir / "anomalies" / f"{t}.html", render(
            "evidence.html", title=f"{t} — {run_dir.name}", type=t, count=results[t].get("count"),
            max_examples=MAX_EXAMPLES, examples=examples))
        pages[t] = os.path.relpath(path, run_dir)
    return pages


def _example(n: int, ex: Any, page_rel: str | None) -> dict[str, Any]:
    links: list[tuple[str, str]] = []
    if page_rel is not None and isinstance(ex, dict):
        links = [(f"{page_rel}#ex-{n}", "evidence")]
        links += [(f"{page_rel}#op-{i}", f"op {i}") for i in example_indices(ex)[:4]]
    return {"text": json.dumps(ex, default=str)[:160], "links": links}


def anomaly_rows(results: dict[str, Any] | None, pages: dict[str, str]) -> list[dict[str, Any]] | None:
    """The anomaly table's rows (None: the run was not checked)."""
    if results is None:
        return None
    bad = set(results.get("bad_error_types", []))
    rows = []
    for t in _anomaly_types(results):
        d = results[t]
        per_key = d.get("per_key")
        rows.append({"type": t, "count": d.get("count"), "bad": t in bad, "page": pages.get(t),
                     "examples": [_example(n, ex, pages.get(t)) for n, ex in enumerate(d.get("examples", [])[:3])],
                     "per_key": json.dumps(per_key) if per_key else ""})
    return rows


def _failover_rows(perf: RunPerf | None) -> list[dict[str, str]]:
    if perf is None or not perf.faults:
        return []
    return [{"fault": r["fault"], "name": r["name"], "target": r["target"], "start": _num(r["start_s"]),
             "end": _num(r["end_s"]), "first_ok_after_start": _num(r["first_ok_after_start_s"], "{:.3f}"),
             "first_ok_after_heal": _num(r["first_ok_after_heal_s"], "{:.3f}"),
             "unavailable": _num(r["unavailable_s"]) + (f" (key {r['unavailable_key']})"
                                                         if r["unavailable_key"] is not None else "")}
            for r in failover_table(perf)]


def _schedule_rows(test: dict[str, Any]) -> list[dict[str, str]]:
    rows = []
    for f in test.get("schedule") or []:
        if not isinstance(f, dict):
            continue
        targets = ", ".join(f"{k}: {t.get('role')}" + (f"({t['key']})" if t.get("key") is not None else "")
                            + f" [fallback {t.get('node')}]" for k, t in (f.get("targets") or {}).items()
                            if isinstance(t, dict))
        rows.append({"id": str(f.get("id")), "at": _num(f.get("at_s"), "{:.1f}"),
                     "duration": _num(f.get("duration_s"), "{:.1f}"), "name": fault_name(f), "targets": targets})
    return rows


def _node_files(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for sub, what in (("nodes", "logs"), ("replicas", "replica dumps")):
        d = run_dir / sub
        if not d.is_dir():
            continue
        for node in sorted(p for p in d.iterdir() if p.is_dir()):
            files = sorted(f for f in node.iterdir() if f.is_file())
            out.append({"node": node.name, "what": what,
                        "links": [(os.path.relpath(f, run_dir), f.name) for f in files]})
    return out


def replay_command(run_dir: Path) -> str:
    return f"chaos replay {shlex.quote(str(run_dir.resolve()))}"


def _perf_summary(results: dict[str, Any] | None) -> dict[str, str] | None:
    p = (results or {}).get("perf") or {}
    if not p:
        return None
    lat = p.get("ok_latency_ms") or {}
    return {"p50": _num(lat.get("p50"), "{:.1f}"), "p99": _num(lat.get("p99"), "{:.1f}"),
            "max": _num(lat.get("max"), "{:.1f}"), "ok_per_s": _num(p.get("ok_per_s"), "{:.1f}"),
            "availability": _num(p.get("availability"), "{:.4f}"), "fault_windows": str(p.get("fault_windows")),
            "max_recovery_s": _num(p.get("max_recovery_s"), "{:.3f}")}


def write_report(run_dir: Path, perf: RunPerf | None = None) -> Path:
    """Write `run_dir/report.html` (and `anomalies/*.html`) from the run's files; returns its path."""
    test = _read(run_dir / "test.json") or {}
    results = _read(run_dir / "results.json")
    cfg: dict[str, Any] = test["config"] if isinstance(test.get("config"), dict) else {}
    verdict = verdict_of(results, test)
    name = str(cfg.get("name", run_dir.parent.name))
    pages = write_evidence(run_dir, results, str(cfg.get("topic", "chaos"))) if results else {}
    facts = [("seed", test.get("seed")), ("git revision", test.get("git")), ("image", test.get("image", "-")),
             ("complete", test.get("complete")), ("recovered after heal", test.get("recovered", "-")),
             ("drain complete", test.get("drained", "-")), ("ops", json.dumps(test.get("ops", {}))),
             ("phases (s)", json.dumps(test.get("phases", {})))]
    text = render(
        "report.html", title=f"{name} {run_dir.name}: {verdict}", name=name, run=run_dir.name, verdict=verdict,
        has_index=(run_dir.parent.parent / "index.html").is_file(),
        bad=list((results or {}).get("bad_error_types", [])),
        error=test.get("error") or "", interrupted=test.get("interrupted") or "", stopped_in=test.get("stopped_in"),
        replay=replay_command(run_dir), anomalies=anomaly_rows(results, pages),
        warnings=list((results or {}).get("warnings", [])), elle=(results or {}).get("elle") or None,
        faults=run_faults(results), perf=_perf_summary(results),
        plots=[(p, PLOT_ALT.get(p, p)) for p in PLOTS if (run_dir / p).is_file()],
        failover=_failover_rows(perf), schedule=_schedule_rows(test), facts=facts,
        config=[(k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in cfg.items()],
        files=[p for p in ("history.jsonl", "test.json", "results.json", "history.elle.json")
               if (run_dir / p).is_file()],
        node_files=_node_files(run_dir),
        coverage=coverage_rows(results), note=str((results or {}).get("verdict_note", "")),
    )
    return write_page(run_dir / "report.html", text)


def coverage_rows(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """The report's coverage section from results.json: the bug switches (exercised or not), then every
    probe with its description and hits, those never hit first."""
    cov = (results or {}).get("coverage")
    if not isinstance(cov, dict):
        return None
    desc: dict[str, str] = cov.get("descriptions", {})
    hit: dict[str, int] = cov.get("hit", {})
    rows: list[dict[str, Any]] = [{"probe": p, "description": desc.get(p, ""), "hits": int(hit.get(p, 0))}
                                  for p in sorted(desc, key=lambda p: (p in hit, p))]
    bugs = [{"bug": b, "probe": v.get("probe"), "hit": bool(v.get("hit"))} for b, v in cov.get("bugs", {}).items()]
    return {"rows": rows, "bugs": bugs, "hit": len(hit), "total": len(desc), "nodes": cov.get("nodes", 0)}
