"""Run real broker processes for tests: `python -m logbroker` on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"broker did not listen on {port}")


@dataclass
class BrokerProc:
    data: Path
    port: int = field(default_factory=free_port)
    overrides: list[str] = field(default_factory=list)
    bugs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # added to this process's environment
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data.parent / f"broker-{self.port}.log"

    def start(self) -> BrokerProc:
        args = [sys.executable, "-m", "logbroker", "-o", f"log.dirs={self.data}",
                "-o", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--log-level", os.environ.get("LOGBROKER_TEST_LOG_LEVEL", "INFO")]
        for o in self.overrides:
            args += ["-o", o]
        for b in self.bugs:
            args += ["--bug", b]
        if os.environ.get("LOGBROKER_TEST_WIRE_TRACE"):  # the consumer-routing requests and their answers
            args.append("--wire-trace")
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, env={**os.environ, **self.env})
        wait_port(self.port)
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(20)
        return self.proc.returncode if self.proc else 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def env_without_proxy() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
