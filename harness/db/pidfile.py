"""Processes found by their pid files: the shell a node runs to ask, signal and kill one.

Any system's process is driven this way (ours and a process system's alike): the start command
writes the pid file, and every other operation reads it. Each command is idempotent — no pid file,
or a dead process, is fine — because nemeses and teardown may repeat it on any exit path.
"""

from __future__ import annotations


def alive_cmd(pidfile: str) -> str:
    """Prints the pid and exits 0 while the process of `pidfile` runs; exits non-zero otherwise."""
    return f"[ -f {pidfile} ] && kill -0 $(cat {pidfile}) 2>/dev/null && cat {pidfile}"


def signal_cmd(pidfile: str, sig: str) -> str:
    """Send `sig` (STOP, CONT, TERM) to the process of `pidfile`, if there is one."""
    return f"[ -f {pidfile} ] && kill -{sig} $(cat {pidfile}) 2>/dev/null; true"


def kill_cmd(pidfile: str) -> str:
    """SIGKILL (after SIGCONT, so a paused process dies too), wait until it is gone, drop its pid file.

    libfaketime leaves /dev/shm/faketime_shm_* behind when its process is killed; remove the ones
    whose owner is dead."""
    return (f"if [ -f {pidfile} ]; then p=$(cat {pidfile}); kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; "
            f"for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; rm -f {pidfile}; fi; "
            "for f in /dev/shm/faketime_shm_*; do [ -e \"$f\" ] || continue; "
            "p=${f##*_}; kill -0 \"$p\" 2>/dev/null || rm -f \"$f\"; done; true")


def parse_pid(stdout: str, ok: bool) -> int | None:
    """What `alive_cmd` printed, as a pid (None: not running)."""
    out = stdout.strip()
    return int(out) if ok and out.isdigit() else None


def listeners_cmd(port: int) -> str:
    """Prints the pids of the processes listening on TCP `port` (none: nothing serves it), one a line."""
    return f"ss -Hltnp 'sport = :{port}' 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u; true"


def parse_pids(stdout: str) -> set[int]:
    return {int(x) for x in stdout.split() if x.isdigit()}
