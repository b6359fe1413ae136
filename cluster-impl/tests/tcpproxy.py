"""A loopback TCP proxy whose connections a test can cut, to drop a client's connections mid-stream, or
hold (close every new one at once) for a while."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class CuttableProxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._stop = False
        self.cuts = 0
        #: while set, a connection is accepted and closed at once (`hold`): what a ZooKeeper server
        #: without a quorum does to a client's handshake
        self.holding = False
        self.refused: list[float] = []  # monotonic times of the connections closed so
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.holding:
                self.refused.append(time.monotonic())
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut_all(self) -> None:
        """Reset every live connection (both directions), as a flaky network would."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
        self.cuts += 1

    def hold(self) -> None:
        """Cut every live connection and, until `release`, close each new one as soon as it opens."""
        self.holding = True
        self.cut_all()

    def release(self) -> None:
        self.holding = False

    def close(self) -> None:
        self._stop = True
        self.listener.close()
        self.cut_all()
