"""Fixtures for broker tests: real standalone broker processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from brokerlib import BrokerProc


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProc]:
    """A fresh standalone broker (auto topic creation on, RF 1) for one test."""
    b = BrokerProc(tmp_path / "data").start()
    yield b
    b.kill()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[type]:
    made: list[BrokerProc] = []

    def make(**kw: object) -> BrokerProc:
        b = BrokerProc(tmp_path / f"data{len(made)}", **kw)  # type: ignore[arg-type]
        made.append(b)
        return b

    yield make  # type: ignore[misc]
    for b in made:
        b.kill()
