"""The harness's errors and the exit codes they map to.

    ChaosError                      one readable sentence on stderr, and its exit code
    ├── HistoryError                exit 2   a history that cannot be judged: a bad line (named), no ops
    ├── UsageError                  exit 3   bad flag, name, path or config; fix the command line
    ├── ProvisionError              exit 4   docker/ssh could not give us nodes
    ├── RemoteError                 exit 5   a node did not answer or a command on it failed
    │   ├── RemoteUnreachable
    │   ├── RemoteTimeout
    │   └── RemoteCommandError
    ├── EnvironmentProblem          exit 6   this machine: Java/Spark missing, a read-only or full disk,
    │                                        CHAOS_HOME unusable, a Spark master that does not answer
    └── Interrupted                 exit 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP: healed, torn down, history kept
    (any other exception)           exit 7   a bug in the harness: one sentence, the traceback in a file

Verdict exit codes (not errors) are 0 valid, 1 anomalies found, 2 unknown/incomplete. A malformed
history is "unknown" too: the harness cannot say whether the system was right, so it must not say
"valid", and it is not the harness's fault either. Every message should tell the user what to do next.
"""

from __future__ import annotations

import signal

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_USAGE = 3
EXIT_PROVISION = 4
EXIT_REMOTE = 5
EXIT_ENVIRONMENT = 6
EXIT_INTERNAL = 7

#: exit code per stop signal: the shell's convention, 128 + signal number
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


class ChaosError(Exception):
    """Base of every error the CLI turns into one sentence and an exit code."""

    exit_code = EXIT_USAGE


class HistoryError(ChaosError):
    """A history that cannot be judged: the message names the file, the line and the reason."""

    exit_code = EXIT_UNKNOWN


class UsageError(ChaosError):
    """The user asked for something that does not exist or does not make sense; fix the flag."""

    exit_code = EXIT_USAGE


class ProvisionError(ChaosError):
    """Nodes could not be created or found; check Docker / the hosts file."""

    exit_code = EXIT_PROVISION


class RemoteError(ChaosError):
    """Something went wrong on a node; the message names the node."""

    exit_code = EXIT_REMOTE

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


class EnvironmentProblem(ChaosError):
    """This machine cannot do what was asked (a missing program, a read-only or full disk, ...)."""

    exit_code = EXIT_ENVIRONMENT


class Interrupted(ChaosError):
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP): faults were healed and nodes torn down."""

    exit_code = 130

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.exit_code = SIGNAL_EXIT.get(signal.Signals(signum), 128 + int(signum))
        self.signum = signum
