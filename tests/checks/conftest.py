"""One SparkSession for every check test (starting one costs seconds)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Any:
    from results.spark import get_spark

    return get_spark("local[2]")
