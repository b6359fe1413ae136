"""`report.html` for one run: what a person opens first.

In order: the verdict; how to reproduce it (the exact `chaos replay` command); every anomaly with
its examples, each linking to an evidence page (`anomalies/<type>.html`) that shows the history
lines (op and its invoke) and the replica-dump records the example names; the four plots; the
failover table; the fault schedule as planned; configuration, seed, git revision, image and phase
timings; links to the raw files and the nodes' logs. Static files only, relative links, no scripts:
it reads the same from disk, from `chaos serve`, or from a CI artifact.

The evidence pages come from one streaming pass over the history through `kernel.history.read_ops`
(the one reader) that keeps only the ops the examples name, so a big history costs one read.
"""

from __future__ import annotations

import html
import json
import os
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernel.history import NEMESIS, Op, OpType, read_ops
from results.index import badge, page, verdict_of
from results.plots import PLOTS, RunPerf, failover_table, fault_name

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


def _e(x: Any) -> str:
    return html.escape(str(x))


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
    if types:
        (run_dir / "anomalies").mkdir(exist_ok=True)
    for t in types:
        body = [f'<p><a href="../report.html">&larr; report</a></p><h1>{_e(t)}</h1>',
                f"<p>{_e(results[t].get('count'))} found; the first {MAX_EXAMPLES} examples with the history "
                f"lines and replica records they name. Raw: <a href=\"../history.jsonl\">history.jsonl</a>, "
                f"<a href=\"../results.json\">results.json</a>.</p>"]
        for n, ex in enumerate(results[t].get("examples", [])[:MAX_EXAMPLES]):
            if not isinstance(ex, dict):
                continue
            body.append(f'<h2 id="ex-{n}">example {n + 1}</h2><pre>{_e(json.dumps(ex, default=str))}</pre>')
            idx = example_indices(ex)
            if idx:
                body.append("<h3>history.jsonl</h3><table><tr><th>op index</th><th>line</th></tr>")
                for i in idx:
                    for op in ops.get(i, []):
                        mark = " <b>&larr;</b>" if op.index == i else ""
                        body.append(f'<tr id="op-{op.index}"><td>{op.index}{mark}</td>'
                                    f"<td><code>{_e(json.dumps(op.to_json(), default=str))}</code></td></tr>")
                    if i not in ops:
                        body.append(f"<tr><td>{i}</td><td class=\"muted\">not in the history</td></tr>")
                body.append("</table>")
            key = ex.get("key")
            if isinstance(key, int) and not isinstance(key, bool):
                rows = replica_rows(run_dir, topic, key, example_offsets(ex), example_values(ex))
                files = _replica_files(run_dir, topic, key)
                links = ", ".join(f'<a href="../{_e(os.path.relpath(f, run_dir))}">'
                                  f"{_e(os.path.relpath(f, run_dir))}</a>" for f in files)
                body.append(f"<h3>replica dumps of key {key}</h3><p>{links or 'no replica dumps'}</p>")
                if rows:
                    body.append("<table><tr><th>file</th><th>record</th></tr>" + "".join(
                        f"<tr><td>{_e(f)}</td><td><code>{_e(line)}</code></td></tr>" for f, line in rows)
                        + "</table>")
                elif files:
                    body.append('<p class="muted">no dumped record at these offsets or with these values</p>')
        path = run_dir / "anomalies" / f"{t}.html"
        path.write_text(page(f"{t} — {run_dir.name}", "\n".join(body)))
        pages[t] = os.path.relpath(path, run_dir)
    return pages


def _example_cell(t: str, n: int, ex: Any, page_rel: str | None) -> str:
    text = _e(json.dumps(ex, default=str)[:160])
    if page_rel is None or not isinstance(ex, dict):
        return f"<code>{text}</code>"
    links = [f'<a href="{_e(page_rel)}#ex-{n}">evidence</a>']
    links += [f'<a href="{_e(page_rel)}#op-{i}">op {i}</a>' for i in example_indices(ex)[:4]]
    return f"<code>{text}</code><br>{' · '.join(links)}"


def anomaly_table(results: dict[str, Any] | None, pages: dict[str, str]) -> str:
    if results is None:
        return '<p id="anomalies" class="muted">No results.json: the run was not checked.</p>'
    bad = set(results.get("bad_error_types", []))
    rows = []
    for t in _anomaly_types(results):
        d = results[t]
        exs = d.get("examples", [])[:3]
        cells = "<br>".join(_example_cell(t, n, ex, pages.get(t)) for n, ex in enumerate(exs))
        per_key = d.get("per_key")
        extra = f"<br><span class=\"muted\">per key: {_e(json.dumps(per_key))}</span>" if per_key else ""
        rows.append(f'<tr class="anomaly" data-type="{_e(t)}"><td><a href="{_e(pages.get(t, "#"))}">{_e(t)}</a></td>'
                    f"<td>{_e(d.get('count'))}</td><td>{'yes' if t in bad else 'no'}</td><td>{cells}{extra}</td></tr>")
    if not rows:
        rows.append('<tr class="none"><td colspan="4">no anomalies found</td></tr>')
    return ('<table id="anomalies"><thead><tr><th>anomaly</th><th>count</th><th>makes the run invalid</th>'
            "<th>examples</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _kv_table(items: Iterable[tuple[str, Any]], table_id: str) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in items)
    return f'<table id="{table_id}">{rows}</table>'


def _failover_html(perf: RunPerf | None) -> str:
    if perf is None or not perf.faults:
        return '<p class="muted">No fault windows.</p>'
    head = ("<tr><th>fault</th><th>kind</th><th>target</th><th>start (s)</th><th>heal (s)</th>"
            "<th>first ok after start (s)</th><th>first ok after heal (s)</th>"
            "<th>longest time without an ok send on one key (s)</th></tr>")
    rows = []
    for r in failover_table(perf):
        key = f" (key {r['unavailable_key']})" if r["unavailable_key"] is not None else ""
        rows.append(f"<tr><td>{_e(r['fault'])}</td><td>{_e(r['name'])}</td><td>{_e(r['target'])}</td>"
                    f"<td>{_num(r['start_s'])}</td><td>{_num(r['end_s'])}</td>"
                    f"<td>{_num(r['first_ok_after_start_s'], '{:.3f}')}</td>"
                    f"<td>{_num(r['first_ok_after_heal_s'], '{:.3f}')}</td>"
                    f"<td>{_num(r['unavailable_s'])}{_e(key)}</td></tr>")
    return f'<table id="failover">{head}{"".join(rows)}</table>'


def _schedule_html(test: dict[str, Any]) -> str:
    sched = test.get("schedule") or []
    if not sched:
        return '<p class="muted">No faults were planned.</p>'
    rows = []
    for f in sched:
        if not isinstance(f, dict):
            continue
        targets = ", ".join(f"{k}: {t.get('role')}" + (f"({t['key']})" if t.get("key") is not None else "")
                            + f" [fallback {t.get('node')}]" for k, t in (f.get("targets") or {}).items()
                            if isinstance(t, dict))
        rows.append(f"<tr><td>{_e(f.get('id'))}</td><td>{_num(f.get('at_s'), '{:.1f}')}</td>"
                    f"<td>{_num(f.get('duration_s'), '{:.1f}')}</td>"
                    f"<td>{_e(fault_name(f))}</td><td>{_e(targets)}</td></tr>")
    return ("<table id=\"schedule\"><tr><th>id</th><th>at (s)</th><th>for (s)</th><th>fault</th><th>targets "
            "(as planned)</th></tr>" + "".join(rows) + "</table>")


def _files_html(run_dir: Path) -> str:
    items = [p for p in ("history.jsonl", "test.json", "results.json", "history.elle.json") if (run_dir / p).is_file()]
    out = ["<ul>"] + [f'<li><a href="{_e(p)}">{_e(p)}</a></li>' for p in items]
    for sub, what in (("nodes", "logs"), ("replicas", "replica dumps")):
        d = run_dir / sub
        if not d.is_dir():
            continue
        for node in sorted(p for p in d.iterdir() if p.is_dir()):
            files = sorted(f for f in node.iterdir() if f.is_file())
            links = ", ".join(f'<a href="{_e(os.path.relpath(f, run_dir))}">{_e(f.name)}</a>' for f in files)
            out.append(f"<li>{_e(node.name)} {what}: {links or 'none'}</li>")
    out.append("</ul>")
    return "".join(out)


def replay_command(run_dir: Path) -> str:
    return f"chaos replay {shlex.quote(str(run_dir.resolve()))}"


def _perf_summary(results: dict[str, Any] | None) -> str:
    p = (results or {}).get("perf") or {}
    if not p:
        return ""
    lat = p.get("ok_latency_ms") or {}
    return (f"<p>ok latency p50 {_num(lat.get('p50'), '{:.1f}')} ms, p99 {_num(lat.get('p99'), '{:.1f}')} ms, "
            f"max {_num(lat.get('max'), '{:.1f}')} ms; {_num(p.get('ok_per_s'), '{:.1f}')} ok ops/s; "
            f"availability {_num(p.get('availability'), '{:.4f}')}; {_e(p.get('fault_windows'))} fault windows, "
            f"worst recovery after a heal {_num(p.get('max_recovery_s'), '{:.3f}')} s.</p>")


def write_report(run_dir: Path, perf: RunPerf | None = None) -> Path:
    """Write `run_dir/report.html` (and `anomalies/*.html`) from the run's files; returns its path."""
    test = _read(run_dir / "test.json") or {}
    results = _read(run_dir / "results.json")
    cfg: dict[str, Any] = test["config"] if isinstance(test.get("config"), dict) else {}
    verdict = verdict_of(results, test)
    name = str(cfg.get("name", run_dir.parent.name))
    pages = write_evidence(run_dir, results, str(cfg.get("topic", "chaos"))) if results else {}
    body = []
    index = run_dir.parent.parent / "index.html"
    if index.is_file():
        body.append('<p><a href="../../index.html">&larr; all runs</a></p>')
    bad = ", ".join((results or {}).get("bad_error_types", []))
    body.append(f'<h1>{_e(name)} <span class="muted">{_e(run_dir.name)}</span></h1>'
                f'<p id="verdict" data-verdict="{verdict}">{badge(verdict)} '
                f"{_e('anomalies that make it invalid: ' + bad) if bad else ''}</p>")
    if test.get("error"):
        body.append(f"<p>The harness stopped in <b>{_e(test.get('stopped_in'))}</b>: {_e(test['error'])}</p>")
    elif test.get("interrupted"):
        body.append(f"<p>Stopped by {_e(test['interrupted'])} during {_e(test.get('stopped_in'))}.</p>")
    body.append(f"<h2>reproduce</h2><pre id=\"replay\">{_e(replay_command(run_dir))}</pre>"
                f"<p class=\"muted\">Runs the same configuration and seed: the same fault schedule and op "
                f"streams; <code>chaos replay</code> prints both schedules and anomaly lists side by side.</p>")
    body.append("<h2>anomalies</h2>" + anomaly_table(results, pages))
    for w in (results or {}).get("warnings", []):
        body.append(f'<p class="muted">warning: {_e(w)}</p>')
    elle = (results or {}).get("elle") or {}
    if elle:
        body.append(f"<p class=\"muted\">elle-cli: {_e(elle.get('status'))} ({_e(elle.get('detail'))})</p>")
    body.append("<h2>plots</h2>" + _perf_summary(results))
    shown = [p for p in PLOTS if (run_dir / p).is_file()]
    if shown:
        body.append('<div id="plots">' + "".join(
            f'<p><img src="{p}" alt="{_e(PLOT_ALT.get(p, p))}" style="max-width:100%"></p>' for p in shown) + "</div>")
    else:
        body.append('<p class="muted">No plots: the check wrote no perf/ (it did not run, or ran with --no-perf).</p>')
    body.append("<h2>failover</h2>" + _failover_html(perf))
    body.append("<h2>fault schedule</h2>" + _schedule_html(test))
    facts = [("seed", test.get("seed")), ("git revision", test.get("git")), ("image", test.get("image", "-")),
             ("complete", test.get("complete")), ("recovered after heal", test.get("recovered", "-")),
             ("drain complete", test.get("drained", "-")), ("ops", json.dumps(test.get("ops", {}))),
             ("phases (s)", json.dumps(test.get("phases", {})))]
    body.append("<h2>run</h2>" + _kv_table(facts, "facts"))
    body.append("<h2>configuration</h2>" + _kv_table(
        ((k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in cfg.items()), "config"))
    body.append("<h2>files</h2>" + _files_html(run_dir))
    out = run_dir / "report.html"
    tmp = run_dir / ".report.html.tmp"
    tmp.write_text(page(f"{name} {run_dir.name}: {verdict}", "\n".join(body)))
    tmp.replace(out)
    return out
