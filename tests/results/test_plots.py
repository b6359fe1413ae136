"""Plots from a real run's perf/: four PNGs of the expected size, shading that matches faults.json,
heal and drain marks from the history, and a failover table that agrees with the check's numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle

from results.plots import (
    DPI,
    FIGURES,
    PLOTS,
    SHADE_ALPHA,
    SIZE_IN,
    availability_by_kind,
    failover_table,
    load_perf,
    no_op_seconds,
    write_plots,
)


def xspan(patch: Any) -> tuple[float, float]:
    """The x extent of an axvspan (a Rectangle in recent matplotlib, a Polygon before)."""
    if isinstance(patch, Rectangle):
        return patch.get_x(), patch.get_x() + patch.get_width()
    xs = patch.get_xy()[:, 0]
    return float(min(xs)), float(max(xs))


def test_writes_four_pngs_of_the_expected_size(valid_run: Path) -> None:
    paths = write_plots(valid_run)
    assert [p.name for p in paths] == list(PLOTS)
    for p in paths:
        img = mpimg.imread(p)
        assert img.shape[:2] == (round(SIZE_IN[1] * DPI), round(SIZE_IN[0] * DPI)), p.name
        rgb = img[..., :3].reshape(-1, 3)
        assert len(np.unique((rgb * 255).astype(int), axis=0)) > 50, f"{p.name} is nearly blank"
        assert p.stat().st_size > 20_000


def test_history_marks_come_from_the_history(valid_run: Path) -> None:
    perf = load_perf(valid_run)
    ops = [json.loads(x) for x in (valid_run / "history.jsonl").read_text().splitlines()]
    heals = [o["time"] / 1e9 for o in ops if o["process"] == "nemesis" and o["f"] == "heal"]
    finals = [o["time"] / 1e9 for o in ops if o.get("final")]
    assert perf.marks.heal_s == pytest.approx(heals) and len(heals) == 1
    assert perf.marks.drain_s == pytest.approx((min(finals), max(finals)))
    assert sum(len(v) for v in perf.marks.ok_sends.values()) == sum(
        len(o["value"]) for o in ops if o["f"] == "send" and o["type"] == "ok")


@pytest.mark.parametrize("name", list(FIGURES))
def test_shading_matches_faults_json(valid_run: Path, name: str) -> None:
    """Every window of faults.json is one band, at its start and heal, in its family's colour from
    test.json's nemesis_perf; heal and drain are marked where the history has them."""
    perf = load_perf(valid_run)
    faults = json.loads((valid_run / "perf" / "faults.json").read_text())
    families = json.loads((valid_run / "test.json").read_text())["nemesis_perf"]
    assert {w["family"] for w in faults} == {"partition", "kill"}
    fig = FIGURES[name](perf)
    ax = fig.axes[0]
    bands = {p.get_gid(): p for p in ax.patches if str(p.get_gid()).startswith("fault:")}
    assert set(bands) == {f"fault:{w['fault']}" for w in faults}
    for w in faults:
        band = bands[f"fault:{w['fault']}"]
        assert xspan(band) == pytest.approx((w["start_s"], w["end_s"]))
        assert band.get_facecolor()[:3] == pytest.approx(to_rgb(families[w["family"]]["color"]))
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "partition (controller)" in legend and "kill (controller)" in legend
    assert "heal" in legend and "final drain" in legend
    heal = [ln for ln in ax.get_lines() if ln.get_gid() == "heal"]
    assert len(heal) == 1 and heal[0].get_xdata()[0] == pytest.approx(perf.marks.heal_s[0])
    drain = [p for p in ax.patches if p.get_gid() == "drain"]
    assert perf.marks.drain_s is not None and len(drain) == 1
    assert xspan(drain[0])[0] == pytest.approx(perf.marks.drain_s[0])


def test_shading_is_in_the_png_pixels(valid_run: Path) -> None:
    """Read availability.png back: in the middle of each fault window, above the data, the pixels are
    the family colour blended over white at the shading alpha; outside any window they are white."""
    perf = load_perf(valid_run)
    fig = FIGURES["availability.png"](perf)
    path = valid_run / "availability.png"
    fig.savefig(path, dpi=DPI)
    img = mpimg.imread(path)[..., :3]
    ax = fig.axes[0]
    height = img.shape[0]

    def pixel(x: float, y: float) -> np.ndarray:
        px, py = ax.transData.transform((x, y))
        return img[int(round(height - py)), int(round(px))]

    for w in json.loads((valid_run / "perf" / "faults.json").read_text()):
        mid = (w["start_s"] + w["end_s"]) / 2
        want = 1 - SHADE_ALPHA * (1 - np.array(to_rgb(w["color"])))
        got = [pixel(mid + dx, y) for dx in (-0.6, 0, 0.6) for y in (0.35, 0.5, 0.65)]
        matches = sum(bool(np.allclose(g, want, atol=0.03)) for g in got)
        assert matches >= 6, (w["fault"], want, got)
    assert np.allclose(pixel(4.0, 0.5), 1.0, atol=0.02)  # before any fault: white background


def test_availability_counts_silent_seconds_as_outages(valid_run: Path) -> None:
    """Seconds in which nothing completed (all workers stuck) are 0 on the "all" line, not gaps."""
    perf = load_perf(valid_run)
    silent = no_op_seconds(perf)
    assert silent, "this fixture's controller faults stall every worker for a few seconds"
    all_ops = availability_by_kind(perf)["all"]
    seen = set(perf.availability["second"])
    for s in silent:
        assert s not in seen and all_ops[s] == 0.0
    for _, row in perf.availability.iterrows():
        assert all_ops[int(row["second"])] == pytest.approx(row["ok"] / row["total"])


def test_failover_table_agrees_with_the_check(valid_run: Path) -> None:
    perf = load_perf(valid_run)
    faults = json.loads((valid_run / "perf" / "faults.json").read_text())
    rows = failover_table(perf)
    assert [r["name"] for r in rows] == ["partition-controller", "kill-controller"]
    assert [r["target"] for r in rows] == ["n1", "n3"]
    for r, w in zip(rows, faults, strict=True):
        assert r["first_ok_after_heal_s"] == pytest.approx(w["recovery_s"], abs=1e-6)
        assert r["first_ok_after_start_s"] is not None and r["first_ok_after_start_s"] >= 0
        # nothing completed for 3 s inside each window: some key had no ok send for at least that long
        assert r["unavailable_s"] >= 3.0
        assert r["unavailable_s"] <= (w["end_s"] - w["start_s"]) + 5.0


def test_a_run_without_faults_or_drain_still_plots(tmp_path: Path, valid_run: Path) -> None:
    (valid_run / "perf" / "faults.json").write_text("[]")
    (valid_run / "history.jsonl").unlink()
    paths = write_plots(valid_run)
    assert all(p.stat().st_size > 10_000 for p in paths)
    assert failover_table(load_perf(valid_run)) == []


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_long_fault_name_fits_beside_the_axes(valid_run: Path, name: str) -> None:
    """The layout is fixed, not matplotlib's constrained one, with only the legend measured: a fault
    label of 57 characters (today's longest, a family label such as "crash, unsynced lost" with its
    kind, are under 40) lies wholly inside the figure, and the axes end before it begins."""
    faults = json.loads((valid_run / "perf" / "faults.json").read_text())
    faults[0]["label"] = "partition-majorities-ring"
    faults[0]["kind"] = "an even longer kind, so wider"  # shown as "label (kind)"
    (valid_run / "perf" / "faults.json").write_text(json.dumps(faults))
    fig = FIGURES[name](load_perf(valid_run))
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    legend = fig.legends[0].get_window_extent(renderer)
    axes = fig.axes[0].get_window_extent(renderer)
    width, height = fig.get_figwidth() * fig.dpi, fig.get_figheight() * fig.dpi
    assert legend.x0 >= 0 and legend.y0 >= 0 and legend.x1 <= width and legend.y1 <= height
    assert axes.x1 < legend.x0
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("an even longer kind" in t for t in labels)
