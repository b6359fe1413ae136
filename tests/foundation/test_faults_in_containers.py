"""The fault primitives work inside the node containers: iptables, SIGSTOP/SIGCONT, libfaketime."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.docker

PROBE = "timeout 2 bash -c 'exec 3<>/dev/tcp/{ip}/{port}' && echo open || echo closed"


def _listen(remote, port: int) -> None:  # type: ignore[no-untyped-def]
    remote.exec(
        f"setsid nohup python3 -c \"import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, "
        f"socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0',{port})); s.listen(50); "
        f"[s.accept() for _ in iter(int, 1)]\" >/dev/null 2>&1 < /dev/null & echo $! > /tmp/listener-{port}.pid"
    )
    time.sleep(0.5)


def test_every_node_answers_over_ssh(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    for node in docker_cluster.nodes:
        res = docker_cluster.remote(node.name).exec("hostname")
        assert res.stdout.strip() == node.name


def test_iptables_drop_cuts_one_link_only(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    n1, n2, n3 = docker_cluster.nodes
    r1 = docker_cluster.remote("n1")
    for n in (n2, n3):
        _listen(docker_cluster.remote(n.name), 7001)
    try:
        assert r1.exec(PROBE.format(ip=n2.ip, port=7001)).stdout.strip() == "open"
        r1.exec(f"iptables -A OUTPUT -d {n2.ip} -j DROP")
        assert r1.exec(PROBE.format(ip=n2.ip, port=7001)).stdout.strip() == "closed"
        assert r1.exec(PROBE.format(ip=n3.ip, port=7001)).stdout.strip() == "open"
    finally:
        r1.exec(f"iptables -D OUTPUT -d {n2.ip} -j DROP", check=False)
    assert r1.exec(PROBE.format(ip=n2.ip, port=7001)).stdout.strip() == "open"
    for n in (n2, n3):
        docker_cluster.remote(n.name).exec("kill $(cat /tmp/listener-7001.pid)", check=False)


def test_sigstop_leaves_state_t_and_sigcont_resumes(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    r3 = docker_cluster.remote("n3")
    pid = r3.exec("setsid nohup sleep 300 >/dev/null 2>&1 < /dev/null & echo $!").stdout.strip()
    try:
        r3.exec(f"kill -STOP {pid}")
        assert r3.exec(f"ps -o stat= -p {pid}").stdout.strip().startswith("T")
        r3.exec(f"kill -CONT {pid}")
        assert r3.exec(f"ps -o stat= -p {pid}").stdout.strip().startswith("S")
    finally:
        r3.exec(f"kill -KILL {pid}", check=False)


def test_faketime_offset_file_moves_the_wall_clock_only(docker_cluster) -> None:  # type: ignore[no-untyped-def]
    """A Python process under libfaketime sees time.time() jump by the per-node offset, read at run time."""
    r2 = docker_cluster.remote("n2")
    script = (
        "import time,sys\n"
        "a=time.time(); m=time.monotonic()\n"
        "sys.stdout.write(f'{a}\\n'); sys.stdout.flush()\n"
        "open('/tmp/ft-ready','w').close()\n"
        "while open('/etc/chaos/faketime').read().strip() != '+120': time.sleep(0.05)\n"
        "time.sleep(0.2)\n"
        "print(time.time()-a, time.monotonic()-m)\n"
    )
    r2.put("/tmp/ft.py", script.encode())
    r2.exec("echo +0 > /etc/chaos/faketime; rm -f /tmp/ft-ready")
    try:
        r2.exec("setsid nohup /opt/chaos/bin/faketime-run python3 /tmp/ft.py > /tmp/ft.out 2>&1 < /dev/null &")
        r2.exec("for i in $(seq 100); do [ -f /tmp/ft-ready ] && break; sleep 0.1; done; test -f /tmp/ft-ready")
        host_before = time.time()
        r2.exec("echo +120 > /etc/chaos/faketime")
        r2.exec("for i in $(seq 100); do [ $(wc -l < /tmp/ft.out) -ge 2 ] && break; sleep 0.1; done")
        lines = r2.exec("cat /tmp/ft.out").stdout.split("\n")
        wall_jump, mono = (float(x) for x in lines[1].split())
        assert 119.0 < wall_jump < 125.0, lines
        assert mono < 5.0, lines  # the monotonic clock is left alone
        assert abs(time.time() - host_before) < 30  # the host's clock did not move
        unfaked = float(r2.exec("python3 -c 'import time; print(time.time())'").stdout)
        assert abs(unfaked - time.time()) < 30  # and processes without libfaketime see real time
    finally:
        r2.exec("echo +0 > /etc/chaos/faketime; rm -f /tmp/ft.py /tmp/ft.out /tmp/ft-ready", check=False)
