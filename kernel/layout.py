"""Where things live on a node: the contract between the node image, the DB, the nemeses and the dumps.

The node image (harness/image) creates these paths and wrapper scripts; the DB (deploying ZooKeeper
and brokers) writes the configs and starts the processes; nemeses find processes by pid file and
skew clocks by writing FAKETIME_FILE. Keep them here, once, so no two modules disagree.
"""

from __future__ import annotations

# --- the broker (cluster-impl, installed into its own venv in the image) ---
BROKER_VENV = "/opt/logbroker"
BROKER_PYTHON = f"{BROKER_VENV}/bin/python"
BROKER_CONFIG = "/etc/chaos/broker.properties"
BROKER_DATA = "/var/lib/logbroker"
BROKER_LOG = "/var/log/chaos/broker.log"
BROKER_PIDFILE = "/run/chaos/broker.pid"
#: the broker processes' coverage probe counts, one file per process (outside the broker's disk, so a
#: power loss or a lost disk does not take the evidence with it)
BROKER_PROBES = "/var/log/chaos/probes"
BROKER_PORT = 9092
#: the clients' host in a cut's grudge (`kernel.capabilities.Cut`): the control host the workers run on
#: (the simulator's network knows it by this name; containers see it as their network's gateway)
CLIENTS = "control"

# --- the broker's disk: a FUSE file system (the image's lazyfs) over BROKER_DISK, mounted at
# BROKER_DATA, that forgets what was written and not fsynced when told the power went out (SIGUSR1)
BROKER_DISK = "/var/lib/logbroker.disk"
LAZYFS = "/opt/chaos/bin/lazyfs"
LAZYFS_PIDFILE = "/run/chaos/lazyfs.pid"
LAZYFS_REPORT = "/run/chaos/lazyfs.json"
LAZYFS_LOG = "/var/log/chaos/lazyfs.log"

# --- ZooKeeper (Debian's package; started with java directly, not the init script) ---
ZK_CONFIG = "/etc/chaos/zoo.cfg"
ZK_DATA = "/var/lib/chaos-zookeeper"
ZK_LOG = "/var/log/chaos/zookeeper.log"
ZK_PIDFILE = "/run/chaos/zookeeper.pid"
ZK_JARS = ("zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple")
ZK_CLASSPATH = ":".join(f"/usr/share/java/{jar}.jar" for jar in ZK_JARS)
ZK_CLIENT_PORT = 2181
ZK_PEER_PORT = 2888
ZK_ELECTION_PORT = 3888

# --- clock skew: libfaketime reads this file on every clock call (FAKETIME_NO_CACHE=1) ---
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
FAKETIME_FILE = "/etc/chaos/faketime"  # holds e.g. "+0" or "+120" (seconds, libfaketime syntax)
#: sitecustomize that replaces time.sleep with a select()-based wait (libfaketime + Python 3.11)
FAKETIME_SITE = "/opt/chaos/faketime-site"

# --- tools in the image ---
START_BROKER = "/opt/chaos/bin/start-broker"  # daemonises the broker under libfaketime, writes the pid file
DUMP_REPLICAS = f"{BROKER_PYTHON} -m logbroker.dump"

LOG_DIR = "/var/log/chaos"
RUN_DIR = "/run/chaos"
