"""Plain SQLite (Python's sqlite3, Debian's libsqlite3) on the harness's lazyfs, as Tansu 0.6.0 sets it
(WAL, synchronous=NORMAL): commit in a child, SIGKILL it, tell lazyfs the power went out, reopen,
PRAGMA integrity_check. Run inside a node container: python3 sqlite_crash.py DIR CYCLES SYNC"""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

d, cycles, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3]
db = os.path.join(d, "t.db")
WRITER = f"""
import sqlite3, os, sys
c = sqlite3.connect({db!r}, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous={sync}")
c.execute("create table if not exists r (k integer, v blob)")
print("ready", flush=True)
i = 0
while True:
    c.execute("BEGIN IMMEDIATE")
    c.execute("insert into r values (?, ?)", (i, os.urandom(200)))
    c.execute("COMMIT")
    i += 1
"""
with open("/run/chaos/lazyfs.pid") as f:
    lazy_pid = int(f.read())
bad = 0
for n in range(cycles):
    p = subprocess.Popen([sys.executable, "-c", WRITER], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    time.sleep(0.5 + (n % 7) * 0.3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    rep = "/run/chaos/lazyfs.json"
    if os.path.exists(rep):
        os.remove(rep)
    os.kill(lazy_pid, signal.SIGUSR1)
    while not os.path.exists(rep):
        time.sleep(0.05)
    with open(rep) as f:
        lost = json.load(f)["lost"]
    c = sqlite3.connect(db)
    try:
        ok = c.execute("PRAGMA integrity_check").fetchone()[0]
        rows = c.execute("select count(*) from r").fetchone()[0]
    except sqlite3.DatabaseError as e:
        ok, rows = f"error: {e}", -1
    c.close()
    bad += ok != "ok"
    print(json.dumps({"cycle": n, "lost": lost, "integrity": ok, "rows": rows}), flush=True)
print(json.dumps({"cycles": cycles, "corrupt": bad, "synchronous": sync}))
