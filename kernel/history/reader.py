"""The one reader of `history.jsonl`: strict, streaming, and honest about crashed runs.

`read_ops(path)` yields every op, checking each line against the schema (`schema.check_line`) and
each completion against its invoke. The first bad line is a `HistoryError` with its number and
reason — never a silent drop, never a guess. What a crashed run leaves behind is not an error but
is remembered: a torn last line (no newline at the end of the file) and invokes whose completions
were never written. `scan(path)` walks the file once and returns those facts with counts; the
checks use it to decide whether a history can be judged at all, and how.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kernel.errors import HistoryError
from kernel.history.op import MOP_FS, NEMESIS, Op, OpType
from kernel.history.schema import LineProblem, check_completion, check_line

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class _Twice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _refuse_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Twice(k)
        out[k] = v
    return out


def repeated_key_problem(raw: bytes, decoded: Any) -> str | None:
    """Why the line's keys cannot be trusted — a key twice in one object — or None.

    A JSON decoder keeps the last of two equal keys and drops the other without a word, so
    `{"0": [[3, 7]], "0": [[4, 8]]}` would lose a poll's first records and the check would judge a
    history that is not the file's. The common case costs one encode: a line that re-encodes to
    itself byte for byte has exactly the keys its decoded value has, so none twice (the writer's
    compact lines do, unless they hold escaped non-ASCII text or exponent numbers). Any other line
    (spaces, escapes, another number format) is parsed again by the standard library, which sees
    every key; one nested too deeply for it is refused too (its keys cannot be checked)."""
    if _encode(decoded) == raw.rstrip(b"\r\n"):
        return None
    try:
        json.loads(raw, object_pairs_hook=_refuse_twice)
    except _Twice as e:
        return f"key {e.key!r} appears twice in one object (a JSON reader would keep only the last)"
    except RecursionError:
        return "nested too deeply to check that no key appears twice in one object"
    except ValueError:  # msgspec accepted it; nothing more to learn here
        return None
    return None


@dataclass
class HistoryScan:
    """What one pass over a history found (counts, and the traces a crash leaves)."""

    path: Path
    ops: int = 0
    client_ops: int = 0
    nemesis_ops: int = 0
    final_ops: int = 0  # ops of the final drain (`"final": true`)
    #: the last of them to complete was not ok: the drain gave up there, short of the end (ours stops at
    #: its first non-ok op; a foreign history's final reads may retry after one, and count if they end ok)
    final_ended_short: bool = False
    txn_ops: int = 0  # send, poll and txn ops invoked: none means nothing was tested (empty-transaction-graph)
    ctp_ops: int = 0  # consume-transform-produce transactions invoked (the exactly-once check reads those)
    completions: dict[str, int] = field(default_factory=lambda: {t.value: 0 for t in OpType if t is not OpType.INVOKE})
    pending: dict[str, int] = field(default_factory=dict)  # process -> line of its unfinished invoke
    truncated_tail: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def incomplete(self) -> bool:
        return self.truncated_tail or bool(self.pending)

    def drain_gave_up(self, test_json: dict[str, Any] | None) -> bool:
        """A final drain started and stopped short: its last op ended other than ok (ours gives up at
        the first: a poll that could not find the partition's leader for a minute is `info`, and what
        lay past it was never looked for), or the harness said so (test.json `drained: false`)."""
        return self.final_ended_short or (self.final_ops > 0 and test_json is not None
                                          and test_json.get("drained") is False)

    def drain_complete(self, test_json: dict[str, Any] | None) -> bool:
        """Did a final drain read every key to its end? Only then does `unseen` mean lost. A container
        run whose drain kept hearing NOT_LEADER after a partition was once judged INVALID for 107
        `unseen` values that sat in every replica's log."""
        return self.final_ops > 0 and not self.drain_gave_up(test_json)


class _Reader:
    def __init__(self, path: Path, facts: HistoryScan) -> None:
        self.path = path
        self.facts = facts
        self.last_index = -1
        self.open: dict[str, tuple[int, Op]] = {}

    def bad(self, n: int, reason: str) -> HistoryError:
        return HistoryError(f"{self.path}, line {n}: {reason}; the history cannot be judged (fix or remove that line)")

    def ops(self) -> Iterator[Op]:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below; a generator keeps it open while streaming
        except OSError as e:
            raise HistoryError(f"cannot read {self.path}: {e.strerror or e}") from None
        with f:
            for n, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                try:
                    d = _decode(raw)
                except (msgspec.MsgspecError, ValueError, RecursionError) as e:  # ValueError: bad UTF-8
                    if not raw.endswith(b"\n"):  # only the file's last line can lack its newline
                        self.facts.truncated_tail = True
                        self.facts.warnings.append(f"line {n}: torn last line ignored (the run probably crashed)")
                        return
                    reason = "nested too deeply" if isinstance(e, RecursionError) else f"not JSON ({e})"
                    raise self.bad(n, reason) from None
                problem = repeated_key_problem(raw, d)
                if problem is not None:
                    raise self.bad(n, problem)
                try:
                    op = check_line(d)
                    self.pair(n, op)
                except LineProblem as e:
                    raise self.bad(n, str(e)) from None
                yield op
        for proc, (n, _) in sorted(self.open.items(), key=lambda kv: kv[1][0]):
            self.facts.pending[proc] = n
            self.facts.warnings.append(f"line {n}: process {proc}'s op has no completion (treated as unknown)")

    def pair(self, n: int, op: Op) -> None:
        if op.index <= self.last_index:
            raise LineProblem(f"index {op.index} does not increase (the previous op had {self.last_index})")
        self.last_index = op.index
        facts = self.facts
        facts.ops += 1
        if op.process == NEMESIS:
            facts.nemesis_ops += 1
            return
        facts.client_ops += 1
        if op.final:
            facts.final_ops += 1
        proc = str(op.process)
        if op.type is OpType.INVOKE:
            if op.f in MOP_FS:
                facts.txn_ops += 1
                facts.ctp_ops += op.extra.get("ctp") is True
            if proc in self.open:
                raise LineProblem(f"process {proc} invokes again while its op from line {self.open[proc][0]} "
                                  "has no completion (a process has one op in flight)")
            self.open[proc] = (n, op)
            return
        started = self.open.pop(proc, None)
        if started is None:
            raise LineProblem(f"{op.type} completion for process {proc} without an invoke")
        if op.final:
            facts.final_ended_short = op.type is not OpType.OK
        check_completion(started[1], op, started[0])
        facts.completions[op.type.value] += 1


def read_ops(path: Path, facts: HistoryScan | None = None) -> Iterator[Op]:
    """Every op of the history, in file order; HistoryError at the first bad line."""
    return _Reader(path, facts if facts is not None else HistoryScan(path)).ops()


def scan(path: Path) -> HistoryScan:
    """One strict pass over the whole history: its counts and the traces of a crash."""
    facts = HistoryScan(path)
    for _ in read_ops(path, facts):
        pass
    return facts


def pairs(ops: Iterable[Op]) -> Iterator[tuple[Op, Op | None]]:
    """(invoke, completion) for every client op, in completion order; a never-completed invoke comes
    last with None (a crashed run: treat it as `info`). Nemesis ops are skipped."""
    open_: dict[str, Op] = {}
    for op in ops:
        if op.process == NEMESIS:
            continue
        proc = str(op.process)
        if op.type is OpType.INVOKE:
            open_[proc] = op
            continue
        inv = open_.pop(proc, None)
        if inv is not None:
            yield inv, op
    for inv in sorted(open_.values(), key=lambda o: o.index):
        yield inv, None
