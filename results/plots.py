"""Per-run plots from `perf/` (written by the check), with every fault window shaded, as Jepsen's perf plots.

Four PNGs go into the run directory: `latency-raw.png` (every op's latency, coloured by outcome, one
marker per op kind, log scale), `latency-quantiles.png` (p50/p95/p99/max of ok latency per time
window), `rate.png` (ops/s by kind and outcome) and `availability.png` (fraction ok per second, per
op kind and overall). Each plot shades the fault windows of `perf/faults.json` in their family's
colour (the `nemesis_perf` table the run saved in `test.json`), with one legend entry per fault kind,
and marks the heal (a dashed line) and the final drain (a hatched band).

The heal and drain times come from the history through `kernel.history.read_ops`, the one reader; the
same pass notes every acknowledged send's key, so the failover table can say how long each
partition went without an acknowledged write around a fault — the number a person means by
"unavailable", which the all-keys availability of a many-key workload hides.

matplotlib runs with the Agg backend (no display, no GUI toolkit): this runs inside `chaos run`.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen before pyplot loads
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from kernel.history import OpType, pairs, read_ops, writes  # noqa: E402
from results.perf import fault_name  # noqa: E402

PLOTS = ("latency-raw.png", "latency-quantiles.png", "rate.png", "availability.png")
SIZE_IN = (11.0, 4.2)
DPI = 100
SHADE_ALPHA = 0.3
TYPE_COLORS = {"ok": "#2A7AB0", "fail": "#D62728", "info": "#E6A100"}
F_MARKERS = {"send": "o", "poll": "s", "assign": "^", "subscribe": "v", "txn": "D"}
F_STYLES = {"send": "-", "poll": "--", "assign": ":", "subscribe": "-.", "txn": (0, (5, 1, 1, 1))}
QUANTILES = {"p50": (0.5, "#1B9E77"), "p95": (0.95, "#7570B3"), "p99": (0.99, "#D95F02"), "max": (1.0, "#444444")}
#: a fault family without a colour in test.json (a history from elsewhere) still gets a stable one
FALLBACK_COLORS = ["#E9A4A0", "#C5A0E9", "#A0C8E9", "#E9C3A0", "#A0E9B4", "#E9E3A0", "#B0B0B0"]
HATCHES = ["", "//", "\\\\", "xx", "..", "oo"]


@dataclass
class HistoryMarks:
    """What the plots need from the history itself: when the heal and the final drain happened, and
    when each key's sends were acknowledged (for the failover table)."""

    heal_s: list[float] = field(default_factory=list)
    drain_s: tuple[float, float] | None = None
    workload_end_s: float | None = None  # the last completion of a (non-final) worker op
    ok_sends: dict[int, list[float]] = field(default_factory=dict)  # key -> completion times, ascending


def history_marks(history: Path) -> HistoryMarks:
    """One streaming pass over the history through its one reader."""
    marks = HistoryMarks()
    first_final: float | None = None
    last_final: float | None = None

    def client_ops() -> Iterable[Any]:
        nonlocal first_final, last_final
        for op in read_ops(history):
            if not op.is_client:
                if op.f == "heal":
                    marks.heal_s.append(op.time / 1e9)
                continue
            t = op.time / 1e9
            if op.final:
                first_final = t if first_final is None else min(first_final, t)
                last_final = t if last_final is None else max(last_final, t)
            elif op.type is not OpType.INVOKE:
                marks.workload_end_s = t if marks.workload_end_s is None else max(marks.workload_end_s, t)
            yield op

    for _inv, done in pairs(client_ops()):
        if done is None or done.type is not OpType.OK:
            continue
        for w in writes(done):
            marks.ok_sends.setdefault(w.key, []).append(done.time / 1e9)
    for times in marks.ok_sends.values():
        times.sort()
    if first_final is not None and last_final is not None:
        marks.drain_s = (first_final, last_final)
    return marks


@dataclass
class RunPerf:
    """A run's `perf/` files, read once for all plots."""

    latency: pd.DataFrame  # time_s, latency_ms, f, type, process
    rates: pd.DataFrame  # second, f, type, count
    availability: pd.DataFrame  # second, ok, total, availability
    faults: list[dict[str, Any]]
    marks: HistoryMarks

    @property
    def end_s(self) -> float:
        """The last second anything happened in (ops, faults, heal, drain)."""
        ts = [0.0]
        if len(self.latency):
            ts.append(float(self.latency["time_s"].max()))
        ts += [w["end_s"] or w["start_s"] for w in self.faults]
        ts += self.marks.heal_s
        if self.marks.drain_s:
            ts.append(self.marks.drain_s[1])
        return max(ts)


def load_perf(run_dir: Path) -> RunPerf:
    perf = run_dir / "perf"
    faults = json.loads((perf / "faults.json").read_text()) if (perf / "faults.json").is_file() else []
    hist = run_dir / "history.jsonl"
    return RunPerf(
        pd.read_parquet(perf / "latency.parquet"),
        pd.read_parquet(perf / "rates.parquet"),
        pd.read_parquet(perf / "availability.parquet"),
        faults,
        history_marks(hist) if hist.is_file() else HistoryMarks(),
    )


def fault_target(w: dict[str, Any]) -> str:
    """The node(s) a fault hit, as the nemesis recorded them when it started."""
    v = w.get("value")
    try:
        d = json.loads(v) if isinstance(v, str) else v
    except ValueError:
        return ""
    if not isinstance(d, dict):
        return ""
    nodes = [t.get("node") for t in (d.get("targets") or {}).values() if isinstance(t, dict) and t.get("node")]
    nodes += [n for n in d.get("nodes", []) if isinstance(n, str) and n not in nodes]
    return ", ".join(str(n) for n in nodes)


@dataclass(frozen=True)
class Shade:
    """One shaded band: a fault window drawn on every plot."""

    fault: str
    start_s: float
    end_s: float
    color: str
    hatch: str
    label: str


def shades(faults: list[dict[str, Any]], end_s: float) -> list[Shade]:
    """The bands for `faults.json`: colour from the family, hatch per kind within a family, an open
    window (never healed) drawn to the end of the plot."""
    fam_colors: dict[str, str] = {}
    kind_hatch: dict[str, str] = {}
    out = []
    for w in faults:
        fam = str(w.get("family"))
        if fam not in fam_colors:
            fam_colors[fam] = w.get("color") or FALLBACK_COLORS[len(fam_colors) % len(FALLBACK_COLORS)]
        name = fault_name(w)
        if name not in kind_hatch:
            kind_hatch[name] = HATCHES[sum(1 for k in kind_hatch if k.split("-")[0] == fam) % len(HATCHES)]
        label = str(w.get("label") or fam)
        kind = str(w.get("kind") or "")
        out.append(Shade(str(w.get("fault")), float(w["start_s"]), float(w["end_s"] if w["end_s"] is not None
                                                                          else end_s),
                         fam_colors[fam], kind_hatch[name], f"{label} ({kind})" if kind and kind != fam else label))
    return out


def _decorate(ax: Axes, perf: RunPerf) -> list[Any]:
    """Fault bands, heal and drain on one axes; returns legend handles (one per fault kind)."""
    handles: dict[str, Any] = {}
    for s in shades(perf.faults, perf.end_s):
        ax.axvspan(s.start_s, s.end_s, facecolor=s.color, alpha=SHADE_ALPHA, hatch=s.hatch or None,
                   edgecolor="#00000033" if s.hatch else "none", lw=0, gid=f"fault:{s.fault}", zorder=0)
        handles.setdefault(s.label, Patch(facecolor=s.color, alpha=SHADE_ALPHA, hatch=s.hatch or None,
                                          edgecolor="#00000055", label=s.label))
    for t in perf.marks.heal_s:
        ax.axvline(t, color="#222222", ls="--", lw=1.2, gid="heal", zorder=3)
    if perf.marks.heal_s:
        handles["heal"] = Line2D([], [], color="#222222", ls="--", lw=1.2, label="heal")
    if perf.marks.drain_s:
        d0, d1 = perf.marks.drain_s
        ax.axvspan(d0, max(d1, d0 + 0.2), facecolor="none", edgecolor="#555555", hatch="..", lw=0,
                   gid="drain", zorder=0)
        handles["final drain"] = Patch(facecolor="none", edgecolor="#555555", hatch="..", label="final drain")
    ax.set_xlim(0, max(perf.end_s, 1.0) * 1.01)
    ax.set_xlabel("time since the workload started (s)")
    ax.grid(True, alpha=0.25)
    return list(handles.values())


#: the axes' box in figure fractions (left, bottom, top) and the gap (inches) beside the legend. Fixed,
#: not matplotlib's constrained layout: that measured every tick label and text of the figure on each
#: save, about a quarter of drawing the four plots. The labels on the left and below are of known, short
#: text, so only the legend, whose labels are the run's fault names, is measured (`_legend`).
AXES_BOX = (0.065, 0.12, 0.92)
LEGEND_PAD_IN = 0.15


def _figure(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)  # the canvas whose renderer `_legend` measures with, the one savefig draws with
    left, bottom, top = AXES_BOX
    fig.subplots_adjust(left=left, bottom=bottom, top=top, right=1.0 - LEGEND_PAD_IN / SIZE_IN[0])
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11, loc="left")
    return fig, ax


def _legend(fig: Figure, groups: list[list[Any]]) -> None:
    """The legend outside the axes, on the right: its width is measured (its own texts only) and the
    axes end where it begins, so a fault name is not cut off. The axes keep at least half the width: a
    legend wider than that (a name of some 85 characters) overlaps the plot rather than squeezing it away."""
    handles = [h for g in groups for h in g]
    if not handles:
        return
    top = AXES_BOX[2]
    legend = fig.legend(handles=handles, loc="upper right", bbox_to_anchor=(1.0, top), fontsize=8, frameon=False)
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # `_figure` attached it
    width_in = legend.get_window_extent(canvas.get_renderer()).width / fig.dpi
    fig.subplots_adjust(right=max(0.5, 1.0 - (width_in + LEGEND_PAD_IN) / fig.get_figwidth()))


def invoked_s(lat: pd.DataFrame) -> pd.Series:
    """When each op was invoked (perf/ stores completion times): latency belongs where the op began,
    so an op that started inside a fault and finished after the heal is drawn inside the fault."""
    out: pd.Series = lat["time_s"] - lat["latency_ms"] / 1000.0
    return out


def latency_raw(perf: RunPerf) -> Figure:
    fig, ax = _figure("latency of every op, at its invocation")
    lat = perf.latency.assign(t=invoked_s(perf.latency))
    kinds: list[Any] = []
    for (f, typ), d in lat.groupby(["f", "type"], sort=True):
        ax.scatter(d["t"], d["latency_ms"].clip(lower=0.01), s=7, marker=F_MARKERS.get(str(f), "x"),
                   color=TYPE_COLORS.get(str(typ), "#999999"), alpha=0.6, linewidths=0, zorder=2)
    for typ, c in TYPE_COLORS.items():
        if (lat["type"] == typ).any():
            kinds.append(Line2D([], [], ls="", marker="o", color=c, label=typ))
    for f in sorted(lat["f"].unique()) if len(lat) else []:
        kinds.append(Line2D([], [], ls="", marker=F_MARKERS.get(str(f), "x"), color="#555555", label=str(f)))
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    _legend(fig, [kinds, _decorate(ax, perf)])
    return fig


def quantile_window(end_s: float) -> float:
    """Window width: about 60 windows over the run, never under a second."""
    return float(max(1, math.ceil(end_s / 60)))


def latency_quantiles(perf: RunPerf) -> Figure:
    fig, ax = _figure("ok latency quantiles per window of invocation")
    ok = perf.latency[perf.latency["type"] == "ok"]
    width = quantile_window(perf.end_s)
    lines: list[Any] = []
    if len(ok):
        w = (invoked_s(ok) // width) * width + width / 2
        every = pd.Index([i * width + width / 2 for i in range(int(perf.end_s // width) + 1)])
        for f, d in ok.assign(w=w).groupby("f", sort=True):
            g = d.groupby("w")["latency_ms"]
            for q, color in QUANTILES.values():
                # a window without ok ops is a gap in the line, not a straight bridge over the outage
                ys = (g.max() if q == 1.0 else g.quantile(q)).reindex(every)
                ax.plot(ys.index, ys.clip(lower=0.01).values, color=color, ls=F_STYLES.get(str(f), "-"),
                        marker=".", ms=3, lw=1.2, zorder=2)
        lines = [Line2D([], [], color=c, label=n) for n, (_, c) in QUANTILES.items()]
        lines += [Line2D([], [], color="#555555", ls=F_STYLES.get(str(f), "-"), label=str(f))
                  for f in sorted(ok["f"].unique())]
    ax.set_yscale("log")
    ax.set_ylabel(f"latency (ms), {width:g} s windows")
    _legend(fig, [lines, _decorate(ax, perf)])
    return fig


def _seconds(perf: RunPerf) -> pd.Index:
    return pd.RangeIndex(0, int(math.floor(perf.end_s)) + 1, name="second")


def rate(perf: RunPerf) -> Figure:
    fig, ax = _figure("throughput by op kind and outcome")
    lines: list[Any] = []
    secs = _seconds(perf)
    for (f, typ), d in perf.rates.groupby(["f", "type"], sort=True):
        ys = d.groupby("second")["count"].sum().reindex(secs, fill_value=0)
        ax.step(ys.index, ys.values, where="post", color=TYPE_COLORS.get(str(typ), "#999999"),
                ls=F_STYLES.get(str(f), "-"), lw=1.2, zorder=2)
        lines.append(Line2D([], [], color=TYPE_COLORS.get(str(typ), "#999999"), ls=F_STYLES.get(str(f), "-"),
                            label=f"{f} {typ}"))
    ax.set_ylabel("ops/s")
    ax.set_ylim(bottom=0)
    _legend(fig, [lines, _decorate(ax, perf)])
    return fig


def availability_by_kind(perf: RunPerf) -> dict[str, pd.Series]:
    """Fraction ok per second for each op kind (from rates) and for all ops (from availability).

    A second in which no op at all completed while the workers ran is the deepest outage there is,
    so the "all" series counts it as 0, not as a gap; a kind's own series leaves its empty seconds
    as gaps (NaN): assign is rare, and "no poll completed" is already in the "all" line."""
    out: dict[str, pd.Series] = {}
    secs = _seconds(perf)
    for f, d in perf.rates.groupby("f", sort=True):
        tot = d.groupby("second")["count"].sum()
        ok = d[d["type"] == "ok"].groupby("second")["count"].sum().reindex(tot.index, fill_value=0)
        out[str(f)] = (ok / tot).reindex(secs)
    a = perf.availability
    if len(a):
        overall = pd.Series(a["availability"].values, index=a["second"].values).reindex(secs)
        overall[overall.isna() & (overall.index <= silent_until(perf))] = 0.0
        out["all"] = overall
    return out


def silent_until(perf: RunPerf) -> float:
    """Up to when an empty second means an outage: the workers' last completion."""
    if perf.marks.workload_end_s is not None:
        return perf.marks.workload_end_s
    return float(perf.latency["time_s"].max()) if len(perf.latency) else 0.0


def no_op_seconds(perf: RunPerf) -> list[int]:
    """Seconds of the workload in which no client op completed at all."""
    seen = set(perf.availability["second"].astype(int)) if len(perf.availability) else set()
    return [s for s in _seconds(perf) if s not in seen and s <= silent_until(perf)]


def availability(perf: RunPerf) -> Figure:
    fig, ax = _figure("availability: fraction of completed ops that were ok, per second")
    lines: list[Any] = []
    for f, ys in availability_by_kind(perf).items():
        allf = f == "all"
        ax.step(ys.index, ys.values, where="post", lw=2.2 if allf else 1.1, color="#111111" if allf else None,
                ls="-" if allf else F_STYLES.get(f, "-"), alpha=1 if allf else 0.85, zorder=3 if allf else 2,
                label=f"{f} ops" if allf else f)
        lines.append(ax.get_lines()[-1])
    silent = no_op_seconds(perf)
    for s in silent:
        ax.axvspan(s, s + 1, ymin=0, ymax=0.04, color="#D62728", lw=0, zorder=4, gid="no-op-second")
    if silent:
        lines.append(Patch(color="#D62728", label="no op completed"))
    ax.set_ylim(-0.03, 1.05)
    ax.set_ylabel("ok / completed")
    _legend(fig, [lines, _decorate(ax, perf)])
    return fig


FIGURES = {"latency-raw.png": latency_raw, "latency-quantiles.png": latency_quantiles, "rate.png": rate,
           "availability.png": availability}


def write_plots(run_dir: Path, perf: RunPerf | None = None) -> list[Path]:
    """The four PNGs into `run_dir`; returns their paths."""
    perf = perf or load_perf(run_dir)
    out = []
    for name, make in FIGURES.items():
        fig = make(perf)
        path = run_dir / name
        tmp = path.with_suffix(".png.tmp")
        fig.savefig(tmp, dpi=DPI, format="png")
        tmp.replace(path)
        plt.close(fig)
        out.append(path)
    return out


def _longest_gap(times: list[float], lo: float, hi: float) -> float:
    """The longest stretch inside [lo, hi] with no time from `times` (sorted) in it."""
    i = bisect.bisect_left(times, lo)
    j = bisect.bisect_right(times, hi)
    points = [lo, *times[i:j], hi]
    return max((b - a for a, b in zip(points, points[1:], strict=False)), default=0.0)


def failover_table(perf: RunPerf) -> list[dict[str, Any]]:
    """Per fault: when the first ok came after it started and after it healed, and how long the
    worst-hit key went without an acknowledged send around it (from the fault's start to its first
    ok send after the heal), with that stretch's key."""
    ok_times = sorted(perf.latency.loc[perf.latency["type"] == "ok", "time_s"].tolist())
    rows = []
    for w in perf.faults:
        start, end = float(w["start_s"]), w["end_s"]
        i = bisect.bisect_right(ok_times, start)
        first_after_start = ok_times[i] - start if i < len(ok_times) else None
        first_after_heal = None
        if end is not None:
            j = bisect.bisect_right(ok_times, end)
            first_after_heal = ok_times[j] - end if j < len(ok_times) else None
        worst_key, worst_gap = None, 0.0
        for key, times in perf.marks.ok_sends.items():
            stop = float(end) if end is not None else perf.end_s
            k = bisect.bisect_right(times, stop)
            hi = times[k] if k < len(times) else perf.end_s
            gap = _longest_gap(times, start, hi)
            if gap > worst_gap:
                worst_key, worst_gap = key, gap
        rows.append({
            "fault": str(w.get("fault")),
            "name": fault_name(w),
            "target": fault_target(w),
            "start_s": start,
            "end_s": end,
            "first_ok_after_start_s": first_after_start,
            "first_ok_after_heal_s": first_after_heal,
            "unavailable_s": worst_gap if perf.marks.ok_sends else None,
            "unavailable_key": worst_key,
        })
    return rows
