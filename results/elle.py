"""elle-cli: export the history as a list-append history and, when elle-cli is installed, run it.

Mapping (DESIGN.md): a send is an append of its value to the key's list; a poll that read a key
starting at offset 0 is a read of that key's list prefix; polls that started elsewhere say nothing
about the whole list and are dropped from the reads. elle-cli's JSON input is one JSON array of op
maps with keys `index`, `type`, `process`, `f`, `value`, micro-ops `["append", k, v]` and
`["r", k, [v...]]` (keys `:index` etc. in its EDN form). A poll returns a prefix bounded by batch
size, not necessarily the whole list at that instant, so we ask for `serializable` only.

elle-cli is a Java jar (github.com/ligurio/elle-cli); name it with `ELLE_CLI=/path/elle-cli.jar`
(or a wrapper script) or `--elle-cli`. Without it this check is "unknown" (reported as skipped).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.history import Op, OpType, Read, pairs, read_ops, reads, writes

TIMEOUT_S = 600


@dataclass(frozen=True, slots=True)
class ElleResult:
    status: str  # "valid" | "invalid" | "unknown" | "skipped"
    detail: str
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, "output": self.output[-4000:]}


def _mops(op: Op) -> list[list[Any]]:
    """An op's micro-ops in elle's list-append terms (reads only of keys read from offset 0)."""
    out: list[list[Any]] = [["append", w.key, w.value] for w in writes(op)]
    prefixes: dict[int, list[Read]] = {}
    for r in reads(op):
        prefixes.setdefault(r.key, []).append(r)
    for k, rs in prefixes.items():
        if rs[0].offset == 0:
            out.append(["r", k, [r.value for r in rs]])
    return out


def export_list_append(history: Path) -> list[dict[str, Any]]:
    """The history as elle-cli list-append ops: invoke/completion pairs, densely re-indexed.

    Sends become appends (their invoke and completion carry the same append). A poll becomes a read
    transaction only if it completed ok and read some key from offset 0; its invoke then carries the
    same reads with `null` values, as elle expects. Nemesis, assign and subscribe ops are dropped;
    an invoke that never completed becomes an `info` (indeterminate) append.
    """
    events: list[tuple[int, dict[str, Any]]] = []
    for inv, done in pairs(read_ops(history)):
        if inv.f not in ("send", "poll", "txn"):
            continue
        if done is None:
            appends = [m for m in _mops(inv) if m[0] == "append"]
            if appends:
                events.append((inv.index, {"type": "invoke", "f": "txn", "process": inv.process, "value": appends}))
                events.append((2**62, {"type": "info", "f": "txn", "process": inv.process, "value": appends}))
            continue
        mops = _mops(done) if done.type is OpType.OK else [m for m in _mops(inv) if m[0] == "append"]
        if not mops:
            continue
        invoked = [[m[0], m[1], None] if m[0] == "r" else m for m in mops]
        events.append((inv.index, {"type": "invoke", "f": "txn", "process": inv.process, "value": invoked}))
        events.append((done.index, {"type": str(done.type), "f": "txn", "process": done.process, "value": mops}))
    events.sort(key=lambda e: e[0])
    return [{"index": n, **o} for n, (_, o) in enumerate(events)]


def write_export(history: Path, dest: Path) -> Path:
    dest.write_text(json.dumps(export_list_append(history)))
    return dest


def elle_command(explicit: str | None = None) -> list[str] | None:
    target = explicit or os.environ.get("ELLE_CLI")
    if not target:
        return None
    if target.endswith(".jar"):
        return ["java", "-jar", target]
    return shlex.split(target)


def run_elle(history: Path, work_dir: Path, explicit: str | None = None) -> ElleResult:
    cmd = elle_command(explicit)
    if cmd is None:
        return ElleResult("skipped", "elle-cli not installed (set ELLE_CLI or --elle-cli to run it)")
    for c in cmd:
        if (c == cmd[0] or c.endswith(".jar")) and "/" in c and not Path(c).exists():
            return ElleResult("unknown", f"elle-cli is named as {c}, which does not exist")
    export = write_export(history, work_dir / "history.elle.json")
    full = [*cmd, "--model", "list-append", "--consistency-models", "serializable", str(export)]
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError as e:
        return ElleResult("unknown", f"cannot run elle-cli: {e}")
    except subprocess.TimeoutExpired:
        return ElleResult("unknown", f"elle-cli did not finish within {TIMEOUT_S} s")
    text = proc.stdout + proc.stderr
    return parse_elle_output(text, proc.returncode)


def parse_elle_output(text: str, returncode: int) -> ElleResult:
    """elle-cli prints `<file>\\ttrue|false|unknown`. Its exit code alone proves nothing (1 is also
    "bad option", 255 any exception), so only a printed `false` is "invalid"; anything we cannot read
    as a verdict is "unknown" with what it said."""
    last = text.strip().splitlines()[-1] if text.strip() else ""
    verdict = last.split()[-1].lstrip(":") if last else ""
    if verdict == "true" and returncode == 0:
        return ElleResult("valid", "elle-cli found no anomalies", text)
    if verdict == "false" and returncode == 1:
        return ElleResult("invalid", "elle-cli found anomalies", text)
    return ElleResult("unknown", f"elle-cli gave no verdict: {last[:200]!r} (exit {returncode})", text)
