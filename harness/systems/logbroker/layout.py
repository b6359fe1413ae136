"""Where our broker and its ZooKeeper live on a node: the contract between the node image
(harness/image), the deployment (`db.py`) and the dumps. Generic node paths (logs, libfaketime, the
FUSE disk's program) are `kernel.layout`'s."""

from __future__ import annotations

from kernel.layout import LOG_DIR, RUN_DIR

# --- the broker (cluster-impl, installed into its own venv in the image) ---
BROKER_VENV = "/opt/logbroker"
BROKER_PYTHON = f"{BROKER_VENV}/bin/python"
BROKER_CONFIG = "/etc/chaos/broker.properties"
BROKER_DATA = "/var/lib/logbroker"
BROKER_LOG = f"{LOG_DIR}/broker.log"
BROKER_PIDFILE = f"{RUN_DIR}/broker.pid"
#: the broker processes' coverage probe counts, one file per process (outside the broker's disk, so a
#: power loss or a lost disk does not take the evidence with it)
BROKER_PROBES = f"{LOG_DIR}/probes"
BROKER_PORT = 9092

#: the broker's disk: the FUSE file system (`kernel.layout.LAZYFS`) over BROKER_DISK, mounted at
#: BROKER_DATA, that forgets what was written and not fsynced when told the power went out
BROKER_DISK = "/var/lib/logbroker.disk"

# --- ZooKeeper (Debian's package; started with java directly, not the init script) ---
ZK_CONFIG = "/etc/chaos/zoo.cfg"
ZK_DATA = "/var/lib/chaos-zookeeper"
ZK_LOG = f"{LOG_DIR}/zookeeper.log"
ZK_PIDFILE = f"{RUN_DIR}/zookeeper.pid"
ZK_JARS = ("zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple")
ZK_CLASSPATH = ":".join(f"/usr/share/java/{jar}.jar" for jar in ZK_JARS)
ZK_CLIENT_PORT = 2181
ZK_PEER_PORT = 2888
ZK_ELECTION_PORT = 3888

# --- tools in the image ---
START_BROKER = "/opt/chaos/bin/start-broker"  # daemonises the broker under libfaketime, writes the pid file
DUMP_REPLICAS = f"{BROKER_PYTHON} -m logbroker.dump"
