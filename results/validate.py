"""A streaming well-formedness pass over history.jsonl, before any anomaly check.

It names the line and the reason for anything malformed. What a crashed run leaves behind — a torn
last line, invokes whose completions were never written — is tolerated with a warning and makes the
verdict at best "unknown"; anything else (garbage mid-file, a completion without an invoke, an
unknown `f`, indices going backwards) is a `HistoryError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HistoryError
from harness.history import NEMESIS

CLIENT_FS = {"send", "poll", "assign", "txn"}
TYPES = {"invoke", "ok", "fail", "info"}
REQUIRED = ("index", "time", "process", "type", "f")


@dataclass
class Validation:
    path: Path
    ops: int = 0
    client_ops: int = 0
    warnings: list[str] = field(default_factory=list)
    pending: dict[str, int] = field(default_factory=dict)  # process -> line of its unfinished invoke
    truncated_tail: bool = False
    final_ops: int = 0  # ops of the final drain (`"final": true`)

    @property
    def incomplete(self) -> bool:
        return self.truncated_tail or bool(self.pending)


def _numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Stream the file (a 10^7-op history is over a gigabyte); lines keep their newline, so a line
    without one is the torn tail of a crashed run."""
    with open(path, "rb") as f:
        yield from enumerate(f, start=1)


def validate_history(path: Path) -> Validation:
    if not path.is_file():
        raise HistoryError(f"no history at {path}")
    v = Validation(path)
    last_index = -1
    for n, raw in _numbered_lines(path):
        if not raw.strip():
            continue
        try:
            op = json.loads(raw)
        except ValueError as e:
            if not raw.endswith(b"\n"):  # only the file's last line can lack its newline
                v.truncated_tail = True
                v.warnings.append(f"line {n}: torn last line ignored (the run probably crashed): {e}")
                break
            raise HistoryError(f"{path}, line {n}: not JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(op, dict):
            raise HistoryError(f"{path}, line {n}: an op must be a JSON object, not {type(op).__name__}")
        missing = [k for k in REQUIRED if k not in op]
        if missing:
            raise HistoryError(f"{path}, line {n}: op lacks {', '.join(missing)}")
        if op["type"] not in TYPES:
            raise HistoryError(f"{path}, line {n}: unknown type {op['type']!r} (expected invoke/ok/fail/info)")
        if not isinstance(op["index"], int) or op["index"] <= last_index:
            raise HistoryError(f"{path}, line {n}: index {op['index']!r} does not increase (previous {last_index})")
        last_index = op["index"]
        v.ops += 1
        proc = str(op["process"])
        if proc == NEMESIS:
            continue
        if op["f"] not in CLIENT_FS:
            raise HistoryError(
                f"{path}, line {n}: unknown f {op['f']!r} for a client op (expected one of "
                f"{', '.join(sorted(CLIENT_FS))})"
            )
        if op["f"] != "assign" and not isinstance(op.get("value"), list):
            raise HistoryError(f"{path}, line {n}: value of a {op['f']} op must be a list of micro-ops")
        v.client_ops += 1
        if op.get("final") is True:
            v.final_ops += 1
        if op["type"] == "invoke":
            if proc in v.pending:
                raise HistoryError(
                    f"{path}, line {n}: process {proc} invokes again while its op from line "
                    f"{v.pending[proc]} has no completion"
                )
            v.pending[proc] = n
        else:
            if proc not in v.pending:
                raise HistoryError(f"{path}, line {n}: {op['type']} completion for process {proc} without an invoke")
            del v.pending[proc]
    for proc, n in sorted(v.pending.items(), key=lambda kv: kv[1]):
        v.warnings.append(f"line {n}: process {proc}'s op has no completion (treated as unknown)")
    if v.client_ops == 0:
        v.warnings.append("the history has no client operations")
    return v
