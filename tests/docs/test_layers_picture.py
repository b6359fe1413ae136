"""`docs/layers.svg` is the code's picture, not a drawing: it must say what the imports say today.

The SVG carries its import edges in its description (docs/layers.py); a new arrow between boxes, or
one gone (not one more import along an arrow already drawn), makes the committed picture stale, and
this test names the difference and the command that redraws it.
The phases on its right must be the phases a run enters.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from docs import layers

PICTURE = layers.OUT


def _committed_description() -> str:
    text = PICTURE.read_text()
    found = re.search(r"<dc:description>(.*?)</dc:description>", text, re.S)
    assert found, f"{PICTURE} has no description: redraw it with `make docs`"
    return html.unescape(found.group(1))


def _pairs(description: str) -> set[str]:
    """The arrows, without their widths: one more import between two boxes already joined does not
    make the picture wrong, a new arrow (or one gone) does."""
    return {re.sub(r" \(\d+\)$", "", edge) for edge in description.split("; ")}


def test_the_committed_picture_has_todays_import_edges() -> None:
    now = _pairs(layers.description(layers.box_edges()))
    then = _pairs(_committed_description())
    assert now == then, (f"docs/layers.svg is stale (run `make docs`): new {sorted(now - then)}, "
                         f"gone {sorted(then - now)}")


def test_the_picture_shows_every_phase_a_run_enters() -> None:
    steps = layers.phases()
    assert steps[:3] == ["provision", "deploy", "workload"] and "check" in steps
    labels = set(re.findall(r">([^<>]+)</text>", PICTURE.read_text()))
    assert not [s for s in steps if s not in labels], f"docs/layers.svg lacks phases; run `make docs`: {steps}"


def test_boxes_are_layers(tmp_path: Path) -> None:
    """Every box sits above what it imports, so arrows point down, and drawing works from scratch."""
    edges = layers.box_edges()
    row = layers.rows(edges)
    assert row["kernel"] == 0 and all(row[a] > row[b] for a, b in edges)
    out = tmp_path / "layers.svg"
    assert layers.draw(out) == layers.description(edges) and out.stat().st_size > 10_000
