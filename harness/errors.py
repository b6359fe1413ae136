"""The harness's errors and the exit codes they map to.

    ChaosError                      exit 3+  (the harness failed; one readable sentence)
    ├── UsageError                  exit 3   bad flag, unknown name, malformed config
    ├── ProvisionError              exit 4   docker/ssh could not give us nodes
    ├── RemoteError                 exit 5   a node did not answer or a command failed
    │   ├── RemoteUnreachable
    │   ├── RemoteTimeout
    │   └── RemoteCommandError
    ├── HistoryError                exit 6   a history file is malformed
    └── Interrupted                 exit 130 Ctrl-C; healed and torn down, history kept
    (any other exception)           exit 7   a bug in the harness: one sentence, the traceback in a file

Verdict exit codes (not errors) are 0 valid, 1 anomalies found, 2 unknown/incomplete.
Every message should tell the user what to do next.
"""

from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_INTERNAL = 7


class ChaosError(Exception):
    """Base of every error the CLI turns into one sentence and an exit code >= 3."""

    exit_code = 3


class UsageError(ChaosError):
    """The user asked for something that does not exist or does not make sense; fix the flag."""

    exit_code = 3


class ProvisionError(ChaosError):
    """Nodes could not be created or found; check Docker / the hosts file."""

    exit_code = 4


class RemoteError(ChaosError):
    """Something went wrong on a node; the message names the node."""

    exit_code = 5

    def __init__(self, node: str, message: str) -> None:
        super().__init__(f"{node}: {message}")
        self.node = node


class RemoteUnreachable(RemoteError):
    """The node's sshd could not be reached or refused our key."""


class RemoteTimeout(RemoteError):
    """A remote command or transfer did not finish in time."""


class RemoteCommandError(RemoteError):
    """A remote command exited non-zero; stdout/stderr are kept for the message."""

    def __init__(self, node: str, cmd: str, exit_status: int, stdout: str, stderr: str) -> None:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        super().__init__(node, f"`{cmd}` exited {exit_status}: {' | '.join(tail)}")
        self.cmd = cmd
        self.exit_status = exit_status
        self.stdout = stdout
        self.stderr = stderr


class HistoryError(ChaosError):
    """A history file is malformed; the message names the line."""

    exit_code = 6


class Interrupted(ChaosError):
    """The user pressed Ctrl-C; faults were healed and nodes torn down."""

    exit_code = 130
