"""Our broker's declaration: two processes per node, what each plays and what the harness can do to it."""

from __future__ import annotations

from harness.systems.logbroker import layout as bl
from kernel.system import Process, SystemDecl

BROKER = Process(
    "broker", ("broker", "controller", "coordinator"), (bl.BROKER_PORT,),
    frozenset({"kill", "pause", "clock", "lose-unfsynced", "disk-loss", "net", "client-net"}),
    data_dirs=(bl.BROKER_DATA,), log_files=(bl.BROKER_LOG, bl.BROKER_CONFIG))
ZOOKEEPER = Process(
    "zookeeper", ("metadata-store",), (bl.ZK_CLIENT_PORT, bl.ZK_PEER_PORT, bl.ZK_ELECTION_PORT),
    frozenset({"kill", "pause", "net"}), data_dirs=(bl.ZK_DATA,), log_files=(bl.ZK_LOG, bl.ZK_CONFIG))

#: the Debian packages the node image installs for this system (Java and ZooKeeper); the broker itself
#: goes in as a venv of our own wheels (harness/image/build.py)
IMAGE_PACKAGES = ("openjdk-17-jre-headless", "zookeeper", "libslf4j-java")

#: what a node needs for this system (the node image gives it): the broker's venv, Java and ZooKeeper's jar
HEALTH = (("python", f"{bl.BROKER_PYTHON} -c 'import logbroker' && echo ok"),
          ("java", "java -version 2>&1 | head -1"),
          ("zookeeper", "test -r /usr/share/java/zookeeper.jar && echo ok"))

DECL = SystemDecl("logbroker", (BROKER, ZOOKEEPER),
                  extras=frozenset({"replica-dumps", "coverage", "bug-switches", "admin", "registrations"}),
                  health=HEALTH)
