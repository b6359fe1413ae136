"""The run's `clients.log`: what a client library says during a run (librdkafka's offset resets,
detected truncations, unreachable brokers) is kept beside the history, and only during the run."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.client_log import FILE, client_log


def test_the_client_loggers_records_go_to_the_run_directory_only_during_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lg = logging.getLogger("chaos.librdkafka")
    before, handlers = lg.level, list(lg.handlers)
    lg.warning("before the run")
    with client_log(tmp_path) as path:
        assert path == tmp_path / FILE
        lg.warning("process 14 consumer: KafkaError{code=_AUTO_OFFSET_RESET} (partition 2)")
        lg.info("an informational line of the library")
    lg.warning("after the run")
    text = (tmp_path / FILE).read_text()
    assert "_AUTO_OFFSET_RESET" in text and "informational" in text
    assert "before the run" not in text and "after the run" not in text
    assert lg.level == before and lg.handlers == handlers  # put back as it was
    assert "AUTO_OFFSET_RESET" not in capsys.readouterr().err  # never the console


def test_a_run_whose_clients_said_nothing_has_no_clients_log(tmp_path: Path) -> None:
    with client_log(tmp_path):
        pass
    assert not (tmp_path / FILE).exists()
