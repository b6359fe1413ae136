"""`SSHRemote`: the `Remote` protocol on paramiko.

One SSH connection per node, opened lazily and reused (with a lock, since the workload, the
nemesis and the main thread may act on one node at once); a dropped connection is reopened once.
Host keys are checked against the cluster's known_hosts file (never AutoAdd), every call has a
timeout, and every error names the node.
"""

from __future__ import annotations

import posixpath
import threading
import time

import paramiko

from kernel.errors import RemoteCommandError, RemoteTimeout, RemoteUnreachable
from kernel.node import Node
from kernel.remote import Result

CONNECT_TIMEOUT = 10.0


class SSHRemote:
    """A reusable SSH connection to one node."""

    def __init__(self, node: Node, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.node = node
        self._connect_timeout = connect_timeout
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    # --- connection ----------------------------------------------------------------------------
    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        try:
            if self.node.known_hosts:
                client.load_host_keys(self.node.known_hosts)
            else:
                client.load_system_host_keys()
        except (OSError, paramiko.SSHException) as e:  # a missing or unreadable known_hosts file
            raise RemoteUnreachable(self.node.name, f"cannot read the known_hosts file "
                                    f"{self.node.known_hosts or '~/.ssh/known_hosts'}: {e}") from None
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                self.node.ssh_host,
                port=self.node.ssh_port,
                username=self.node.user,
                key_filename=self.node.key_path,
                timeout=self._connect_timeout,
                banner_timeout=self._connect_timeout,
                auth_timeout=self._connect_timeout,
                allow_agent=False,
                look_for_keys=self.node.key_path is None,
            )
        except (OSError, paramiko.SSHException) as e:
            client.close()
            raise RemoteUnreachable(
                self.node.name, f"cannot SSH to {self.node.user}@{self.node.ssh_host}:{self.node.ssh_port}: {e}"
            ) from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(5)
        return client

    def _get_client(self) -> paramiko.SSHClient:
        with self._lock:
            t = self._client.get_transport() if self._client else None
            if self._client is None or t is None or not t.is_active():
                if self._client is not None:
                    self._client.close()
                self._client = self._connect()
            return self._client

    def _drop(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def close(self) -> None:
        self._drop()

    # --- Remote --------------------------------------------------------------------------------
    def exec(self, cmd: str, *, timeout: float = 60.0, check: bool = True, stdin: bytes | None = None) -> Result:
        for attempt in (0, 1):
            try:
                res = self._exec_once(cmd, timeout, stdin)
                break
            except (paramiko.SSHException, EOFError, ConnectionError) as e:
                self._drop()
                if attempt == 1:
                    raise RemoteUnreachable(self.node.name, f"connection lost running `{cmd}`: {e}") from None
        if check and not res.ok:
            raise RemoteCommandError(self.node.name, cmd, res.exit_status, res.stdout, res.stderr)
        return res

    def _exec_once(self, cmd: str, timeout: float, stdin: bytes | None) -> Result:
        transport = self._get_client().get_transport()
        if transport is None:
            raise paramiko.SSHException("no transport")
        chan = transport.open_session(timeout=self._connect_timeout)
        try:
            chan.settimeout(timeout)
            chan.exec_command(cmd)
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + timeout
            while True:
                if chan.recv_ready():
                    out += chan.recv(65536)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                elif chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                else:
                    if time.monotonic() > deadline:
                        raise RemoteTimeout(self.node.name, f"`{cmd}` did not finish within {timeout:.0f} s")
                    time.sleep(0.005)
            status = chan.recv_exit_status()
        except TimeoutError:
            raise RemoteTimeout(self.node.name, f"`{cmd}` did not finish within {timeout:.0f} s") from None
        finally:
            chan.close()
        return Result(self.node.name, cmd, status, out.decode(errors="replace"), err.decode(errors="replace"))

    def _sftp(self) -> paramiko.SFTPClient:
        try:
            return self._get_client().open_sftp()
        except (paramiko.SSHException, OSError) as e:
            self._drop()
            raise RemoteUnreachable(self.node.name, f"cannot open SFTP: {e}") from None

    def put(self, path: str, data: bytes, *, mode: int = 0o644, timeout: float = 60.0) -> None:
        parent = posixpath.dirname(path)
        if parent:
            self.exec(f"mkdir -p '{parent}'", timeout=timeout)
        sftp = self._sftp()
        try:
            sftp.get_channel().settimeout(timeout)
            with sftp.open(path, "wb") as f:
                f.write(data)
            sftp.chmod(path, mode)
        except (TimeoutError, OSError) as e:
            raise RemoteTimeout(self.node.name, f"writing {path} failed: {e}") from None
        finally:
            sftp.close()

    def get(self, path: str, *, timeout: float = 60.0) -> bytes:
        sftp = self._sftp()
        try:
            sftp.get_channel().settimeout(timeout)
            with sftp.open(path, "rb") as f:
                return bytes(f.read())
        except FileNotFoundError:
            raise RemoteCommandError(self.node.name, f"get {path}", 1, "", f"{path}: no such file") from None
        except (TimeoutError, OSError) as e:
            raise RemoteTimeout(self.node.name, f"reading {path} failed: {e}") from None
        finally:
            sftp.close()

    def __enter__(self) -> SSHRemote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
