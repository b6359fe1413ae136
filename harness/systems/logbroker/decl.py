"""Our broker's declaration: two processes per node, what each plays and what the harness can do to it."""

from __future__ import annotations

from harness.systems.logbroker import layout as bl
from kernel.system import Process, SystemDecl

BROKER = Process(
    "broker", ("broker", "controller", "coordinator"), (bl.BROKER_PORT,),
    frozenset({"kill", "pause", "clock", "lose-unfsynced", "disk-loss", "net"}),
    data_dirs=(bl.BROKER_DATA,), log_files=(bl.BROKER_LOG, bl.BROKER_CONFIG))
ZOOKEEPER = Process(
    "zookeeper", ("metadata-store",), (bl.ZK_CLIENT_PORT, bl.ZK_PEER_PORT, bl.ZK_ELECTION_PORT),
    frozenset({"kill", "pause", "net"}), data_dirs=(bl.ZK_DATA,), log_files=(bl.ZK_LOG, bl.ZK_CONFIG))

DECL = SystemDecl("logbroker", (BROKER, ZOOKEEPER),
                  extras=frozenset({"replica-dumps", "coverage", "bug-switches", "admin", "registrations"}))
