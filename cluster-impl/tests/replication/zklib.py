"""A real ZooKeeper server on loopback for replication tests (Debian's zookeeper package)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

CLASSPATH = ":".join(f"/usr/share/java/{j}.jar" for j in ("zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalZooKeeper:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LocalZooKeeper:
        data = self.root / "zk-data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.root / "zoo.cfg"
        cfg.write_text(f"tickTime=500\ndataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                       "maxSessionTimeout=60000\nadmin.enableServer=false\n4lw.commands.whitelist=*\n")
        with open(self.root / "zk.log", "ab") as log:
            self.proc = subprocess.Popen(["java", "-Xmx128m", "-cp", CLASSPATH,
                                          "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"ruok")
                    if s.recv(4) == b"imok":
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError("ZooKeeper did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
