"""A system's data directory on the node image's FUSE disk (lazyfs), which forgets every write that
was not fsynced when told the power went out: the `lose-unfsynced` and `disk-loss` capabilities.

Any system composes it: mount it over the directory its process keeps data in before the process
starts, crash it (after killing the process) to lose what was not fsynced, wipe it while the
process is down. The image's lazyfs is `kernel.layout.LAZYFS`; an ssh host has none, and the disk
families are refused there before a run starts.
"""

from __future__ import annotations

import json
from typing import Any

from kernel import layout
from kernel.remote import Remote


def mount(r: Remote, data: str, backing: str) -> None:
    """Mount lazyfs over `data`, its files kept in `backing`, unless it is mounted or there is no lazyfs."""
    pid = layout.LAZYFS_PIDFILE
    r.exec(f"mkdir -p {data} {backing}; [ -x {layout.LAZYFS} ] || exit 0; mountpoint -q {data} && exit 0; "
           f"rm -f {pid}; setsid {layout.LAZYFS} {backing} {data} --pidfile {pid} --report {layout.LAZYFS_REPORT} "
           f">>{layout.LAZYFS_LOG} 2>&1 </dev/null & "
           f"for i in $(seq 100); do [ -f {pid} ] && mountpoint -q {data} && exit 0; sleep 0.1; done; "
           f"echo 'lazyfs did not mount {data}; see {layout.LAZYFS_LOG}' >&2; exit 1", timeout=30)


def unmount(r: Remote, data: str) -> None:
    pid = layout.LAZYFS_PIDFILE
    r.exec(f"if [ -f {pid} ]; then p=$(cat {pid}); kill -TERM $p 2>/dev/null; "
           f"for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; rm -f {pid}; fi; "
           f"mountpoint -q {data} && fusermount3 -u -z {data}; true", timeout=30)


def lose_unfsynced(r: Remote) -> dict[str, Any]:
    """Tell lazyfs the power went out (call it after the process is killed): every write not fsynced
    is gone. Returns the bytes lost per top-level directory of the disk, for the history."""
    rep = layout.LAZYFS_REPORT
    out = r.exec(f"rm -f {rep}; kill -USR1 $(cat {layout.LAZYFS_PIDFILE}) && "
                 f"for i in $(seq 100); do [ -f {rep} ] && break; sleep 0.05; done; cat {rep}", timeout=30).stdout
    lost: dict[str, Any] = {}
    for path, n in json.loads(out)["lost"].items():
        top = path.split("/", 1)[0]
        lost[top] = lost.get(top, 0) + int(n)
    return dict(sorted(lost.items()))


def wipe(r: Remote, data: str) -> None:
    """The data directory is gone (a replaced disk): everything in it is deleted, through the mount."""
    r.exec(f"find {data} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +", timeout=60)
