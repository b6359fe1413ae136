"""report.html, its evidence pages and the store index, from real run directories: what a reader
sees (verdict, anomaly table, replay command, plots) and that every link points at a real file."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from results.index import scan_store, write_index
from results.present import render_run, store_of
from results.report import example_indices


class Page(HTMLParser):
    """Links, images, elements by id and table rows of one HTML page."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: dict[str, dict[str, str | None]] = {}
        self.rows: list[dict[str, str | None]] = []
        self.text: list[str] = []
        self.feed(path.read_text())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        if tag == "img":
            self.images.append(str(a.get("src")))
        if a.get("id"):
            self.ids[str(a["id"])] = a
        if tag == "tr":
            self.rows.append(a)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def all_text(self) -> str:
        return " ".join(self.text)


def assert_links_resolve(page: Path) -> Page:
    """Every relative href/src of the page names an existing file (and #fragments an existing id)."""
    p = Page(page)
    for ref in p.links + p.images:
        parts = urlsplit(ref)
        if parts.scheme or ref.startswith("#"):
            continue
        target = (page.parent / unquote(parts.path)).resolve()
        assert target.exists(), f"{page.name} links to {ref}, which does not exist"
        if parts.fragment and target.suffix == ".html":
            assert f'id="{parts.fragment}"' in target.read_text(), f"{ref}: no element with that id"
    return p


def test_invalid_run_report(invalid_run: Path) -> None:
    written = render_run(invalid_run)
    assert {p.name for p in written} >= {"report.html", "availability.png", "index.html"}
    results = json.loads((invalid_run / "results.json").read_text())
    page = assert_links_resolve(invalid_run / "report.html")
    assert page.ids["verdict"]["data-verdict"] == "invalid"
    assert "INVALID" in page.all_text
    rows = {r["data-type"]: r for r in page.rows if r.get("class") == "anomaly"}
    assert set(rows) == set(results["error_types"]) == {"inconsistent-offsets", "unseen"}
    assert f"chaos replay {invalid_run.resolve()}" in page.all_text
    assert sorted(page.images) == sorted(["latency-raw.png", "latency-quantiles.png", "rate.png", "availability.png"])
    assert any(link.startswith("nodes/n1/") for link in page.links) and "history.jsonl" in page.links
    assert "failover" in page.ids and "schedule" in page.ids and "config" in page.ids


def test_evidence_pages_show_the_history_lines_and_replica_records(invalid_run: Path) -> None:
    render_run(invalid_run)
    results = json.loads((invalid_run / "results.json").read_text())
    history = {json.loads(x)["index"]: json.loads(x) for x in (invalid_run / "history.jsonl").read_text().splitlines()}
    for t in results["error_types"]:
        ev = invalid_run / "anomalies" / f"{t}.html"
        page = assert_links_resolve(ev)
        for ex in results[t]["examples"]:
            for i in example_indices(ex):
                assert f"op-{i}" in page.ids, (t, i)
                assert json.dumps(history[i]) in page.all_text or str(history[i]["index"]) in page.all_text
    # the divergent offset: the two values it names appear in the replica dumps' records shown
    ex = results["inconsistent-offsets"]["examples"][0]
    text = Page(invalid_run / "anomalies" / "inconsistent-offsets.html").all_text
    assert "replicas/" in text
    for v in ex["values"]:
        assert str(v) in text


def test_valid_run_report(valid_run: Path) -> None:
    render_run(valid_run)
    page = assert_links_resolve(valid_run / "report.html")
    assert page.ids["verdict"]["data-verdict"] == "valid"
    assert "no anomalies found" in page.all_text
    assert "kill-controller" in page.all_text and "partition-controller" in page.all_text
    assert not (valid_run / "anomalies").exists()


def test_index_lists_runs_newest_first_with_verdicts(store: Path, valid_run: Path, invalid_run: Path) -> None:
    crashed = store / "queue" / "20261123T120000-9"
    crashed.mkdir()
    (crashed / "test.json").write_text(json.dumps({"seed": 9, "config": {"name": "queue", "nemesis": ["pause"]},
                                                   "complete": False, "started": 1795500000.0,
                                                   "error": "n2: ssh timed out", "stopped_in": "deploy"}))
    render_run(crashed)
    index = store / "index.html"
    assert index.is_file()
    page = assert_links_resolve(index)
    runs = [r for r in page.rows if r.get("class") == "run"]
    assert [(r["data-name"], r["data-verdict"]) for r in runs] == [
        ("queue", "crashed"), ("bugk", "invalid"), ("queue", "valid")]
    assert "f-name" in page.ids and "f-verdict" in page.ids  # the filters
    assert "n2: ssh timed out" in page.all_text
    crash_page = Page(crashed / "report.html")
    assert crash_page.ids["verdict"]["data-verdict"] == "crashed" and "deploy" in crash_page.all_text


def test_index_ignores_what_is_not_a_run(store: Path) -> None:
    (store / "notes").mkdir()
    (store / "notes" / "x").mkdir()
    (store / "latest").symlink_to(store / "bugk" / "20261123T092300-1")
    assert len(scan_store(store)) == 2
    write_index(store)


def test_a_copied_run_outside_a_store_gets_no_index_in_its_parent(tmp_path: Path, valid_run: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "copy"
    shutil.copytree(valid_run, elsewhere)
    assert store_of(elsewhere) is None
    written = render_run(elsewhere)
    assert not (tmp_path / "index.html").exists() and not (tmp_path / "elsewhere" / "index.html").exists()
    assert {p.name for p in written} == {"report.html", "latency-raw.png", "latency-quantiles.png", "rate.png",
                                         "availability.png"}


def test_fault_counts_name_what_happened_by_family_and_kind() -> None:
    from results.perf import fault_counts

    windows = [{"family": "kill", "kind": "leader"}, {"family": "kill", "kind": "leader"},
               {"family": "pause", "kind": "pause"}, {"family": "partition", "kind": "halves"}]
    assert fault_counts(windows) == {"kill-leader": 2, "partition-halves": 1, "pause": 1}
    assert fault_counts([]) == {}
