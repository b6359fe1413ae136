"""The `Checker` protocol: a history (and what the run stored beside it) in, a verdict out.

As in Jepsen's checker.clj, `valid` is true, false or "unknown", and a checker that crashes says
"unknown" with the reason; it never passes a run it could not judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

Validity = bool | Literal["unknown"]


class Verdict(Protocol):
    """What a checker found: the verdict, the anomaly types, and its exit code (0/1/2)."""

    @property
    def valid(self) -> bool | str: ...

    @property
    def exit_code(self) -> int: ...

    @property
    def bad_error_types(self) -> list[str]: ...


class Checker(Protocol):
    def check(self, run_dir: Path) -> Verdict:
        """Judge the run stored in `run_dir` (history.jsonl, test.json, replicas/); write results there."""
        ...

    def check_many(self, run_dirs: Sequence[Path]) -> list[Any]:
        """Judge several stored runs at once, paying the checker's fixed costs once (a nightly checks
        its runs this way). One entry per run, in order: its verdict, or the `ChaosError` that kept
        that run from being judged; one bad run never hides the others' verdicts."""
        ...

    def print(self, verdict: Any) -> None:
        """Show the verdict to a person (a table, warnings, the verdict line)."""
        ...


def describe(valid: Any) -> str:
    return {True: "VALID", False: "INVALID"}.get(valid, "UNKNOWN") if isinstance(valid, bool) else "UNKNOWN"
