"""Tansu 0.6.0 itself on the harness's lazyfs, outside the harness: produce acks=all from the host,
SIGKILL the broker, wait WAIT s, tell lazyfs the power went out (or not: --no-drop), start it again,
and ask SQLite for the store's integrity (python3's sqlite3 on the node, read-only copy).
usage: tansu_crash.py CONTAINER CYCLES WAIT [--no-drop]"""
import json
import subprocess
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

c, cycles, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
drop = "--no-drop" not in sys.argv
def sh(cmd, check=True):
    return subprocess.run(["docker", "exec", c, "sh", "-c", cmd], capture_output=True, text=True, check=check).stdout
ip = subprocess.run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", c],
                    capture_output=True, text=True).stdout.strip()
START = (f"cd /var/lib/t && RUST_LOG=warn NO_COLOR=1 setsid nohup /usr/local/bin/tansu broker --storage-engine "
         f"sqlite://tansu.db --advertised-listener-url tcp://{ip}:9092 >>/var/log/chaos/tansu.log 2>&1 </dev/null & "
         "echo $! > /run/chaos/tansu.pid")
sh(START)
time.sleep(2)
admin = AdminClient({"bootstrap.servers": f"{ip}:9092"})
try:
    admin.create_topics([NewTopic("t", 4, 1)])["t"].result(timeout=30)
except Exception as e:
    print("topic:", e)
corrupt = 0
for n in range(cycles):
    p = Producer({"bootstrap.servers": f"{ip}:9092", "acks": "all", "enable.idempotence": True, "linger.ms": 0})
    acked = [0]

    def cb(err: object, msg: object, acked: list[int] = acked) -> None:
        acked[0] += err is None

    t0 = time.time()
    while time.time() - t0 < 2 + (n % 5) * 0.5:
        for k in range(4):
            p.produce("t", b"x" * 100, partition=k, on_delivery=cb)
        p.poll(0.005)
    sh("p=$(cat /run/chaos/tansu.pid); kill -KILL $p; while kill -0 $p 2>/dev/null; do sleep 0.05; done")
    time.sleep(wait)
    lost = {}
    if drop:
        sh("rm -f /run/chaos/lazyfs.json; kill -USR1 $(cat /run/chaos/lazyfs.pid); "
           "while [ ! -f /run/chaos/lazyfs.json ]; do sleep 0.05; done")
        lost = json.loads(sh("cat /run/chaos/lazyfs.json"))["lost"]
    p.purge()
    del p
    check = sh("rm -rf /tmp/chk && mkdir /tmp/chk && cp /var/lib/t/tansu.db* /tmp/chk/ && python3 -c \""
               "import sqlite3; c=sqlite3.connect('/tmp/chk/tansu.db'); print(c.execute('pragma integrity_check')"
               ".fetchone()[0])\"", check=False).strip() or "error"
    corrupt += check != "ok"
    print(json.dumps({"cycle": n, "acked": acked[0], "lost": lost, "integrity": check[:120]}), flush=True)
    sh(START)
    time.sleep(1.5)
print(json.dumps({"cycles": cycles, "corrupt": corrupt, "drop": drop, "wait_s": wait}))
