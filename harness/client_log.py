"""`clients.log` in the run directory: what the Kafka client libraries said during the run.

librdkafka reports what it does on its own — a consumer position reset to `auto.offset.reset`
(`_AUTO_OFFSET_RESET`), a log truncation it detected (`_LOG_TRUNCATION`), a broker it could not
reach — as non-fatal errors and log lines the workload does not act on. They stay off the console
(rule: our own sentences only) but must not be lost: a history that shows a consumer rewinding
to offset 0 cannot say why, its client's log can (a librdkafka consumer once read a key from offset 0
again with no assign and no broker answering out of range, and nothing was kept to tell:
docs/measurements/coverage.md, the second night of "A night of the sample plan, twice"). The
broker's side is in `nodes/`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: the client libraries' loggers (`workloads/librdkafka.py` hands librdkafka this one)
CLIENT_LOGGERS = ("chaos.librdkafka",)
FILE = "clients.log"


@contextmanager
def client_log(run_dir: Path) -> Iterator[Path]:
    """Write the client loggers' records to `run_dir/clients.log` for the duration of the block."""
    path = run_dir / FILE
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.setLevel(logging.INFO)
    loggers = [logging.getLogger(name) for name in CLIENT_LOGGERS]
    saved = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    try:
        yield path
    finally:
        for lg, level in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
        handler.close()
