"""JUnit XML for CI: one test case per run of a nightly.

The layout is the one CI servers read (Jenkins, GitLab, GitHub actions' reporters; the schema in
Ant's and Maven Surefire's `junit.xsd`): `<testsuites>` holding one `<testsuite>` with `tests`,
`failures`, `errors`, `skipped` and `time`, and one `<testcase classname name time>` per run. A run
with anomalies is a `<failure>` whose message names the anomaly types and the `chaos replay`
command; a run that crashed, or whose verdict is unknown, is an `<error>` (the harness could not
say); a run the nightly's time budget left out is `<skipped>`. Written with `xml.etree`, so every
message is escaped correctly whatever an exception said.
"""

from __future__ import annotations

import re
import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

OUTCOMES = ("passed", "failure", "error", "skipped")
#: characters XML 1.0 cannot hold at all (terminal escapes in an exception message, NULs)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("?", text)


@dataclass(frozen=True)
class Case:
    """One run as a test case. `outcome` is one of OUTCOMES; `message` is one line, `detail` any text."""

    classname: str
    name: str
    time_s: float
    outcome: str
    message: str = ""
    detail: str = ""
    system_out: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")


def junit_xml(suite: str, cases: list[Case], *, timestamp: float | None = None) -> bytes:
    """The XML document (UTF-8 bytes, with declaration)."""
    counts = {o: sum(1 for c in cases if c.outcome == o) for o in OUTCOMES}
    total = sum(c.time_s for c in cases)
    root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=str(counts["failure"]),
                      errors=str(counts["error"]), skipped=str(counts["skipped"]), time=f"{total:.3f}")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(counts["failure"]),
                       errors=str(counts["error"]), skipped=str(counts["skipped"]), time=f"{total:.3f}",
                       timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(timestamp or time.time())),
                       hostname=socket.gethostname())
    for c in cases:
        tc = ET.SubElement(ts, "testcase", classname=_clean(c.classname), name=_clean(c.name), time=f"{c.time_s:.3f}")
        if c.outcome != "passed":
            tag = {"failure": "failure", "error": "error", "skipped": "skipped"}[c.outcome]
            el = ET.SubElement(tc, tag, message=_clean(c.message))
            if tag != "skipped":
                el.set("type", "anomalies" if tag == "failure" else "harness")
            if c.detail:
                el.text = _clean(c.detail)
        if c.system_out:
            ET.SubElement(tc, "system-out").text = _clean(c.system_out)
    ET.indent(root)
    out: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return out


def write_junit(path: Path, suite: str, cases: list[Case]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(junit_xml(suite, cases))
    tmp.replace(path)
    return path
