"""A real browser reads what `chaos serve` serves: Debian's chromium, headless (installed by the
Makefile's `deps`), loads report.html of a failing and of a valid run and the store's index.html.

How: the test puts a small probe page into the served store. The probe opens the page under test in
a same-origin iframe and, on its load event (which comes after every image has loaded or failed),
writes what it sees as JSON into the DOM: the verdict, the anomaly table's rows, each image's
`naturalWidth`, the index's rows and the effect of its verdict filter. `chromium --headless
--dump-dom` prints that DOM; the test parses the JSON. No driver library, no DevTools client.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from results.present import render_run

CHAOS = str(Path(sys.executable).parent / "chaos")

PROBE = """<!doctype html><html><head><meta charset="utf-8"></head><body><pre id="result">pending</pre>
<script>
var page = new URLSearchParams(location.search).get('page');
var f = document.createElement('iframe');
f.width = 1200; f.height = 900;
f.onload = function () {
  var d = f.contentDocument, out = {title: d.title};
  var v = d.getElementById('verdict');
  out.verdict = v ? v.dataset.verdict : null;
  out.verdictText = v ? v.textContent.trim() : null;
  out.anomalies = Array.from(d.querySelectorAll('#anomalies tr.anomaly')).map(function (r) {
    return [r.dataset.type, r.cells[1].textContent.trim(), r.cells[2].textContent.trim()]; });
  out.noAnomaliesRow = !!d.querySelector('#anomalies tr.none');
  out.images = Array.from(d.images).map(function (i) {
    return {src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}; });
  out.runs = Array.from(d.querySelectorAll('tr.run')).map(function (r) { return [r.dataset.name, r.dataset.verdict]; });
  out.kinds = Array.from(d.querySelectorAll('tr.run')).map(function (r) {
    return [r.dataset.kind, r.cells[1].textContent.trim(), r.cells[r.cells.length - 1].textContent.trim()]; });
  var summ = d.getElementById('summary');
  out.summary = summ ? summ.textContent.trim() : null;
  out.faults = Array.from(d.querySelectorAll('tr.run td.faults')).map(function (c) { return c.textContent.trim(); });
  var rf = d.getElementById('faults');
  out.reportFaults = rf ? rf.textContent.trim() : null;
  var sel = d.getElementById('f-verdict');
  if (sel) {
    out.countOnLoad = d.getElementById('f-count').textContent;
    sel.value = 'invalid'; sel.dispatchEvent(new Event('change'));
    out.visibleWhenInvalid = Array.from(d.querySelectorAll('tr.run')).filter(function (r) {
      return r.style.display !== 'none'; }).map(function (r) { return r.dataset.name; });
    out.countText = d.getElementById('f-count').textContent;
  }
  document.getElementById('result').textContent = JSON.stringify(out);
};
f.src = page;
document.body.appendChild(f);
</script></body></html>
"""


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed: `make deps` installs Debian's chromium (or apt-get install chromium)")
    return exe


@pytest.fixture
def served(store: Path, tmp_path: Path) -> Iterator[str]:
    for run in (store / "queue" / "20261123T091833-5", store / "bugk" / "20261123T092300-1"):
        render_run(run)
    (store / "_probe.html").write_text(PROBE)
    proc = subprocess.Popen([CHAOS, "serve", "--port", "0", str(store)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, f"chaos serve said {line!r}"
        yield m.group(0)
    finally:
        proc.terminate()
        proc.wait(10)


def probe(base: str, page: str, tmp_path: Path) -> dict[str, Any]:
    profile = tmp_path / f"chromium-{os.getpid()}"
    out = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom", f"{base}_probe.html?page={page}"],
        capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="result">(.*?)</pre>', out.stdout, re.S)
    assert m and m.group(1) != "pending", f"no result from the probe: {out.stdout[-500:]} {out.stderr[-1500:]}"
    import html

    result: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    return result


def _all_images_loaded(r: dict[str, Any], n: int) -> None:
    assert len(r["images"]) == n, r["images"]
    for img in r["images"]:
        assert img["complete"] and img["width"] > 0 and img["height"] > 0, img


def test_reports_and_index_in_headless_chromium(served: str, tmp_path: Path) -> None:
    bad = probe(served, "bugk/20261123T092300-1/report.html", tmp_path)
    assert bad["verdict"] == "invalid" and bad["verdictText"].startswith("INVALID")
    assert bad["anomalies"] == [["inconsistent-offsets", "1", "yes"], ["unseen", "4", "yes"]]
    assert not bad["noAnomaliesRow"]
    assert bad["reportFaults"] == "kill-leader \u00d73"
    _all_images_loaded(bad, 4)

    good = probe(served, "queue/20261123T091833-5/report.html", tmp_path)
    assert good["verdict"] == "valid" and good["verdictText"].startswith("VALID")
    assert good["anomalies"] == [] and good["noAnomaliesRow"]
    _all_images_loaded(good, 4)

    index = probe(served, "index.html", tmp_path)
    assert index["title"] == "chaos runs"
    assert sorted(index["runs"]) == [["bugk", "invalid"], ["queue", "valid"]]
    # the counter counts the rows as the page loads (it said "0 of 0 runs" above a table of two)
    assert index["countOnLoad"] == "2 of 2 runs"
    # the faults column says what each run injected, with counts, not the families it could draw from
    faults = dict(zip((name for name, _ in index["runs"]), index["faults"], strict=True))
    assert faults == {"bugk": "kill-leader \u00d73", "queue": "kill-controller, partition-controller"}
    assert index["visibleWhenInvalid"] == ["bugk"] and index["countText"] == "1 of 2 runs"


def test_a_nightly_summary_with_container_runs_and_a_sim_stage(served: str, store: Path, tmp_path: Path) -> None:
    """The night's page and JUnit file list both kinds: container runs and the sim-search stage's mixes,
    a failing mix with its replay command."""
    from harness.nightly import Cell, Entry, Night, Plan, write_summary
    from kernel.spec import RunSpec

    queue, bugk = store / "queue" / "20261123T091833-5", store / "bugk" / "20261123T092300-1"
    spec = RunSpec()
    cells = [Cell("queue", "kills", "default", 1, spec), Cell("queue", "full", "sim-search", 1, spec),
             Cell("queue", "kills", "sim-search", 1, spec)]
    night = Night(Plan("nightly", 600, 90, cells[:1], store), store / "nightly-20261127", 0.0)
    night.entries = [Entry(cells[0], "valid", queue, 40.0),
                     Entry(cells[1], "valid", None, 60.0, [], "412 seeds from 1 clean", kind="sim"),
                     Entry(cells[2], "invalid", bugk, 61.0, ["unseen"], "seed 7 failed after 30 seeds", 1,
                           kind="sim")]
    write_summary(night)
    page = probe(served, "nightly-20261127/index.html", tmp_path)
    assert page["runs"] == [["queue/kills/default", "valid"], ["queue/full/sim-search", "valid"],
                            ["queue/kills/sim-search", "invalid"]]
    assert [k[:2] for k in page["kinds"]] == [["containers", "containers"], ["sim", "simulator"], ["sim", "simulator"]]
    assert page["kinds"][1][2] == "412 seeds from 1 clean" and page["kinds"][2][2] == "unseen"
    assert page["summary"].startswith("3 runs: 1 invalid, 2 valid")
    junit = (night.out_dir / "junit.xml").read_text()
    assert 'name="sim-kills from seed 1"' in junit and f"chaos replay {bugk}" in junit
    assert 'classname="nightly.sim-search"' in junit and 'name="queue-kills seed 1"' in junit


def test_serve_binds_loopback_and_serves_the_store(served: str, store: Path) -> None:
    assert served.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(served + "bugk/20261123T092300-1/availability.png", timeout=10) as r:
        assert r.status == 200 and r.read(8) == b"\x89PNG\r\n\x1a\n"
    with urllib.request.urlopen(served, timeout=10) as r:
        assert b"chaos runs" in r.read()
