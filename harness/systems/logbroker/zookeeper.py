"""ZooKeeper on the nodes: one ensemble member per node, Debian's package, started with java directly.

Why not the init script: the containers have no init system, and the DB needs the pid (pauses and
kills target it) and its own data dir that teardown can wipe. `tickTime` is short so that session
timeouts of a few seconds are allowed (ZooKeeper clamps a session to [2, 20] ticks by default; we
widen the upper bound explicitly) and pauses longer than the session timeout expire it quickly.
"""

from __future__ import annotations

from harness.systems.logbroker import layout as bl
from kernel import layout
from kernel.node import Node

TICK_MS = 500


def zoo_cfg(nodes: list[Node]) -> str:
    lines = [
        f"tickTime={TICK_MS}",
        "initLimit=20",
        "syncLimit=10",
        f"dataDir={bl.ZK_DATA}",
        f"clientPort={bl.ZK_CLIENT_PORT}",
        "maxClientCnxns=0",
        f"minSessionTimeout={2 * TICK_MS}",
        "maxSessionTimeout=60000",
        "4lw.commands.whitelist=ruok,srvr,stat,mntr",
        "admin.enableServer=false",
        "autopurge.purgeInterval=0",
    ]
    for i, node in enumerate(nodes, start=1):
        lines.append(f"server.{i}={node.ip}:{bl.ZK_PEER_PORT}:{bl.ZK_ELECTION_PORT}")
    return "\n".join(lines) + "\n"


def myid(nodes: list[Node], node: Node) -> int:
    """ZooKeeper server ids follow node order: n1 -> 1."""
    return [n.name for n in nodes].index(node.name) + 1


def start_command() -> str:
    """A shell command that starts ZooKeeper detached and records its pid (no-op if it runs)."""
    return (
        f"mkdir -p {layout.RUN_DIR} {layout.LOG_DIR}; "
        f"if [ -f {bl.ZK_PIDFILE} ] && kill -0 $(cat {bl.ZK_PIDFILE}) 2>/dev/null; then exit 0; fi; "
        f"setsid nohup java -Xms64m -Xmx192m -XX:+UseSerialGC -Dzookeeper.4lw.commands.whitelist='*' "
        f"-cp {bl.ZK_CLASSPATH} org.apache.zookeeper.server.quorum.QuorumPeerMain {bl.ZK_CONFIG} "
        f">>{bl.ZK_LOG} 2>&1 < /dev/null & echo $! > {bl.ZK_PIDFILE}"
    )


def probe_command(word: str = "srvr") -> str:
    """Ask the local server a four-letter word over bash's /dev/tcp (no netcat needed in the image)."""
    return (
        f"exec 3<>/dev/tcp/127.0.0.1/{bl.ZK_CLIENT_PORT} && printf {word} >&3 && "
        "timeout 3 cat <&3"
    )
