"""The HTML pages (run report, evidence pages, store index, nightly summary, analysis) as Jinja2
templates in `results/templates/`.

Why templates: the code that gathers a page's facts (what a run did, what the check found) and the
markup that shows them change for different reasons; with the markup in a template a page can be
reworded or restyled without touching, or re-testing, the fact gathering. Autoescaping is on for
every template, so a value from a history or a config (a run name, an anomaly example) is text,
never markup. Undefined names are errors (`StrictUndefined`): a fact the code forgot to pass fails
the page's test instead of rendering blank.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

VERDICT_COLORS = {
    "valid": "#2E7D32",
    "invalid": "#C62828",
    "unknown": "#B26A00",
    "incomplete": "#6D4C41",
    "crashed": "#6A1B9A",
    "skipped": "#757575",
}

_ENV = Environment(
    loader=PackageLoader("results", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_ENV.globals["verdict_colors"] = VERDICT_COLORS


def render(template: str, **facts: Any) -> str:
    """The page `template` with `facts`; every name the template uses must be given."""
    return _ENV.get_template(template).render(**facts)


def write_page(path: Path, text: str) -> Path:
    """Write a page atomically (a reader never sees half a page) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path
