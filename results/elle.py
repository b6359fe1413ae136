"""elle-cli: export the history as a list-append history and, when elle-cli is installed, run it.

elle-cli is an independent second opinion on the logs, not the cycle check: the dependency cycles
Jepsen's Kafka checker reports (G0, G1c and their real-time kinds) are our own search
(`results.cycles`), which knows Kafka's rules (writes are not isolated, so G0 is allowed). elle's
list-append model does not: two transactions whose sends interleave on two keys are a G0 to it. So
the export gives elle one micro-op per transaction: a send is an append of its value to the key's
list; a poll that read a key starting at offset 0 is a read of that key's list prefix; polls that
started elsewhere say nothing about the whole list and are dropped from the reads. What elle then
judges is each key's log on its own — aborted reads (G1a), prefixes that disagree
(`incompatible-order`), duplicates, reads of appends nobody made — with code that is not ours.
elle-cli's JSON input is one JSON array of op maps with keys `index`, `type`, `process`, `f`,
`value`, micro-ops `["append", k, v]` and `["r", k, [v...]]`. A poll returns a prefix bounded by
batch size, not necessarily the whole list at that instant, so we ask for `serializable` only.

elle-cli is a Java program (github.com/ligurio/elle-cli; a launcher or a jar), found as a user
installs it: `--elle-cli PATH`, else `$ELLE_CLI`, else `elle-cli` on `PATH` (`elle_command`).
Without it this check is reported as skipped, and a command says so once when it starts
(`absent_note`). Several histories go to one elle-cli process (`--verbose` prints one result map
per file, in order), so the JVM's start is paid once per batch.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.errors import ChaosError, EnvironmentProblem, UsageError
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
    """An op's micro-ops in elle's list-append terms (reads only of keys read from offset 0; a key
    read by several polls of one op is one read of everything they returned)."""
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

    Each send becomes an append transaction of its own (its invoke and completion carry the same
    append), with its op's outcome; every micro-op after an op's first gets a process of its own, so
    that each process still has one transaction in flight. A poll becomes read transactions only if
    it completed ok and read some key from offset 0: one per key so read, each a pair of its own at
    the op's completion (its invoke carries the read with `null`, as elle expects). A poll is no snapshot: it returns a
    batch-bounded prefix of each key it reads, so two keys read by one poll may be cut at different
    moments, and one transaction holding both would be a false read skew (elle: `G-nonadjacent`);
    a transaction's sends to two keys may interleave with another's (Kafka orders sends when they are
    sent), which elle would call G0. Nemesis, assign and subscribe ops are dropped; an invoke that
    never completed becomes an `info` (indeterminate) append.
    """
    events: list[tuple[int, int, dict[str, Any]]] = []

    def pair(at_invoke: int, at_done: int, process: Any, typ: str, mops: list[list[Any]]) -> None:
        invoked = [[m[0], m[1], None] if m[0] == "r" else m for m in mops]
        events.append((at_invoke, len(events), {"type": "invoke", "f": "txn", "process": process, "value": invoked}))
        events.append((at_done, len(events), {"type": typ, "f": "txn", "process": process, "value": mops}))

    spare = itertools.count(1 << 40)  # the process of each micro-op after an op's first: one op in flight each

    for inv, done in pairs(read_ops(history)):
        if inv.f not in ("send", "poll", "txn"):
            continue
        if done is None:
            for n, m in enumerate(_mops(inv)):
                pair(inv.index, 2**62, inv.process if n == 0 else next(spare), "info", [m])
            continue
        mops = _mops(done) if done.type is OpType.OK else [m for m in _mops(inv) if m[0] == "append"]
        for n, m in enumerate(mops):
            proc = done.process if n == 0 else next(spare)
            pair(inv.index if m[0] == "append" else done.index, done.index, proc, str(done.type), [m])
    events.sort(key=lambda e: (e[0], e[1]))
    return [{"index": n, **o} for n, (_, _, o) in enumerate(events)]


def write_export(history: Path, dest: Path) -> Path:
    dest.write_text(json.dumps(export_list_append(history)))
    return dest


def elle_command(explicit: str | None = None) -> list[str] | None:
    """The command that runs elle-cli, found as a user installs it: `explicit` (`--elle-cli`; an empty
    string turns elle-cli off), else `$ELLE_CLI`, else `elle-cli` on `PATH`; None when there is none.
    A value that is no command line (an unclosed quote) is the user's mistake (UsageError) when
    given as `--elle-cli`, this machine's (EnvironmentProblem) when it is `$ELLE_CLI`."""
    error: type[ChaosError]
    if explicit is not None:
        target, error = explicit, UsageError
        where = f"--elle-cli {explicit!r}"
    elif os.environ.get("ELLE_CLI"):
        target, error = os.environ["ELLE_CLI"], EnvironmentProblem
        where = f"ELLE_CLI={target!r}"
    else:
        found = shutil.which("elle-cli")
        return [found] if found else None
    if not target:
        return None
    if target.endswith(".jar"):
        return ["java", "-jar", target]
    try:
        cmd = shlex.split(target)
    except ValueError as e:
        raise error(f"{where} is not a command line ({e}); name the elle-cli launcher or jar, "
                    "quoted as a shell would") from None
    if not cmd:
        return None
    return cmd


#: what only elle-cli looks for (this module's docstring): the one sentence a command says when it is absent
WITHOUT = ("elle's own list-append check of each key's log (G1a, incompatible-order, duplicates) will not run; "
           "every anomaly of results/README.md, cycles included, is still looked for")


def absent_note(explicit: str | None = None) -> str | None:
    """The sentence to say once, when a command starts, if elle-cli will not run; else None."""
    if explicit == "":
        return None  # turned off on purpose: nothing to tell
    if elle_command(explicit) is not None:
        return None
    return ("elle-cli not found (--elle-cli PATH, $ELLE_CLI or elle-cli on PATH; results/README.md says how to "
            f"get it): {WITHOUT}")


def run_elle(history: Path, work_dir: Path, explicit: str | None = None) -> ElleResult:
    """elle-cli's verdict on one history (its export is written into `work_dir`)."""
    return run_elle_batch([(history, work_dir)], explicit)[0]


def run_elle_batch(runs: list[tuple[Path, Path | None]], explicit: str | None = None,
                   timeout_s: float = TIMEOUT_S) -> list[ElleResult]:
    """elle-cli's verdict on each history, from as few elle-cli processes as it allows: one for the
    lot, so the JVM starts once per batch. Each export goes into its run's directory (or a temporary
    one when the run has none). elle-cli stops at the first file it cannot read (exit 255): that file
    is "unknown" with the reason and the rest go on in a new process."""
    import tempfile

    cmd = elle_command(explicit)
    if cmd is None:
        return [ElleResult("skipped", "elle-cli not found (--elle-cli, $ELLE_CLI or elle-cli on PATH)")] * len(runs)
    for c in cmd:
        if (c == cmd[0] or c.endswith(".jar")) and "/" in c and not Path(c).exists():
            return [ElleResult("unknown", f"elle-cli is named as {c}, which does not exist")] * len(runs)
    with tempfile.TemporaryDirectory(prefix="chaos-elle-") as tmp:
        exports = []
        for n, (history, work_dir) in enumerate(runs):
            where = work_dir if work_dir is not None else Path(tmp)
            exports.append(write_export(history, where / ("history.elle.json" if work_dir else f"{n}.elle.json")))
        out: list[ElleResult] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < len(exports):
            rest = exports[len(out):]
            left = deadline - time.monotonic()
            full = [*cmd, "--model", "list-append", "--consistency-models", "serializable", "--verbose",
                    *map(str, rest)]
            try:
                proc = subprocess.run(full, capture_output=True, text=True, timeout=max(left, 0.1), check=False)
            except FileNotFoundError as e:
                return [*out, *[ElleResult("unknown", f"cannot run elle-cli: {e}")] * len(rest)]
            except subprocess.TimeoutExpired:
                why = f"elle-cli did not finish within {timeout_s:.0f} s"
                return [*out, *[ElleResult("unknown", why)] * len(rest)]
            got = parse_verbose(proc.stdout)
            out.extend(got[: len(rest)])
            if len(got) < len(rest):
                tail = (proc.stderr.strip().splitlines() or [""])[-1][:200]
                out.append(ElleResult("unknown", f"elle-cli failed on this history (exit {proc.returncode}): "
                                                 f"{tail!r}", proc.stdout[-2000:] + proc.stderr[-2000:]))
    return out


def parse_verbose(text: str) -> list[ElleResult]:
    """elle-cli --verbose prints one JSON result map per file, in order, one after another. Only the
    map's `valid?` counts (its exit code is 0 for unknown too, and 1 also means a bad option)."""
    dec = json.JSONDecoder()
    out: list[ElleResult] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        try:
            doc, end = dec.raw_decode(text, pos)
        except ValueError:
            break
        chunk = text[pos:end]
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
        verdict = doc.get("valid?") if isinstance(doc, dict) else None
        kinds = ", ".join(doc.get("anomaly-types", [])) if isinstance(doc, dict) else ""
        if verdict is True:
            out.append(ElleResult("valid", "elle-cli found no anomalies", chunk))
        elif verdict is False:
            out.append(ElleResult("invalid", f"elle-cli found anomalies: {kinds}", chunk))
        else:
            out.append(ElleResult("unknown", f"elle-cli could not decide ({kinds or verdict!r})", chunk))
    return out
