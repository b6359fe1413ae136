"""Where generic node mechanics live on a node: the contract between the node image, the nemeses'
node tools (pid files, libfaketime, the FUSE disk) and the collect phase. Nothing here belongs to one
system under test: each system's own paths live with it (`harness/systems/<name>/`).
"""

from __future__ import annotations

#: the clients' host in a cut's grudge (`kernel.capabilities.Cut`): the control host the workers run on
#: (the simulator's network knows it by this name; containers see it as their network's gateway)
CLIENTS = "control"

LOG_DIR = "/var/log/chaos"
RUN_DIR = "/run/chaos"

# --- a FUSE file system (the image's lazyfs) that forgets what was written and not fsynced when told
# the power went out (SIGUSR1); a system mounts it over its data directory
LAZYFS = "/opt/chaos/bin/lazyfs"
LAZYFS_PIDFILE = f"{RUN_DIR}/lazyfs.pid"
LAZYFS_REPORT = f"{RUN_DIR}/lazyfs.json"
LAZYFS_LOG = f"{LOG_DIR}/lazyfs.log"

# --- clock skew: libfaketime reads this file on every clock call (FAKETIME_NO_CACHE=1) ---
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
FAKETIME_FILE = "/etc/chaos/faketime"  # holds e.g. "+0" or "+120" (seconds, libfaketime syntax)
#: sitecustomize that replaces time.sleep with a select()-based wait (libfaketime + Python 3.11)
FAKETIME_SITE = "/opt/chaos/faketime-site"
#: runs a command under libfaketime with the settings above (any program: a system's start command)
FAKETIME_RUN = "/opt/chaos/bin/faketime-run"
