"""Any stop is a clean stop: SIGTERM and SIGHUP act like Ctrl-C, and teardown cannot be cut short.

CI systems, `timeout`, `docker stop` and systemd stop a process with SIGTERM; a closed terminal
sends SIGHUP. Inside `stop_signals()` each becomes a `Stopped` exception (a KeyboardInterrupt, so
every `except KeyboardInterrupt` path heals and tears down the same way), carrying its signal so the
exit code can say which (130, 143, 129). Inside `shielded()` — cleanup — a signal is remembered,
not raised: a second Ctrl-C must not leave containers or iptables rules behind. It is raised when
the outermost shield ends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_shield_depth = 0
_pending: list[int] = []


def _handler(signum: int, frame: FrameType | None) -> None:
    if _shield_depth > 0:
        _pending.append(signum)
        return
    raise Stopped(signum)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Turn stop signals into `Stopped` in the main thread for the duration (a no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Defer stop signals until the block ends (cleanup, or an engine call that must finish).

    Works on its own too (e.g. `chaos cluster up`, where no `stop_signals` is active): it installs
    the deferring handler for the block and restores what was there."""
    global _shield_depth
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, _handler) for s in STOP_SIGNALS} if main and _shield_depth == 0 else {}
    _shield_depth += 1
    try:
        yield
    finally:
        _shield_depth -= 1
        for s, h in old.items():
            signal.signal(s, h)
        if _shield_depth == 0 and _pending and main:
            signum = _pending[0]
            _pending.clear()
            raise Stopped(signum)


def signum_of(e: BaseException) -> int:
    return int(getattr(e, "signum", signal.SIGINT))
