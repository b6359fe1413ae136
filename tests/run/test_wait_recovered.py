"""`harness.phases.wait_recovered`: a recovered picture counts only once it has held for the settle
time, a relapse starts the settle over, and a deadline ends the wait."""

from __future__ import annotations

from collections.abc import Iterator

from harness.phases import wait_recovered


class _Scripted:
    """A DB whose `recovered` answers a script, one answer per call (the last one repeats)."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers: Iterator[bool] = iter(answers)
        self.last = False
        self.calls = 0

    def recovered(self, topic: str, partitions: int, replication_factor: int) -> bool:
        self.calls += 1
        self.last = next(self.answers, self.last)
        return self.last


def test_a_picture_must_hold_for_the_settle_time() -> None:
    db = _Scripted([True, False, True, True, True, True])
    assert wait_recovered(db, "t", 1, 3, timeout_s=5, settle_s=0.03, poll_s=0.01)  # type: ignore[arg-type]
    assert db.calls >= 5  # the relapse after the first look started the settle over


def test_never_recovered_ends_at_the_deadline() -> None:
    db = _Scripted([False])
    assert not wait_recovered(db, "t", 1, 3, timeout_s=0.05, settle_s=0.03, poll_s=0.01)  # type: ignore[arg-type]


def test_recovered_just_before_the_deadline_may_finish_settling() -> None:
    db = _Scripted([False, False, True])
    assert wait_recovered(db, "t", 1, 3, timeout_s=0.3, settle_s=0.6, poll_s=0.01)  # type: ignore[arg-type]


def test_a_relapse_after_the_deadline_ends_the_wait() -> None:
    db = _Scripted([True, True, False])
    assert not wait_recovered(db, "t", 1, 3, timeout_s=0.01, settle_s=5, poll_s=0.01)  # type: ignore[arg-type]
