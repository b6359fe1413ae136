"""Bad input never deletes data or fakes a verdict (issue: names, paths, configs and histories
checked at the door).

Each case runs the real `chaos` command in a sentinel tree: a fake home holding `CHAOS_HOME` with
another cluster's state, a file beside it, a store with another run's results and a user's own
`store/latest` file. Every case must end with its exit code, one readable line (no traceback),
within a bounded time — and leave the sentinel tree byte for byte as it was. Run cases point Docker
at a socket that does not exist, so an input wrongly accepted fails provisioning instead of
starting containers.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import CHAOS

TIMEOUT_S = 60


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]
    code: int
    says: str  # a substring of the one line the user gets
    files: dict[str, bytes | str] = field(default_factory=dict)  # created under the case dir first
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None


def _op(i: int, proc: object, typ: str, f: str, value: object, **kw: object) -> str:
    return json.dumps({"index": i, "time": i * 10, "process": proc, "type": typ, "f": f, "value": value, **kw})


GOOD = [_op(0, 0, "invoke", "send", [["send", 0, 1]]), _op(1, 0, "ok", "send", [["send", 0, [0, 1]]]),
        _op(2, 1, "invoke", "poll", [["poll"]]), _op(3, 1, "ok", "poll", [["poll", {"0": [[0, 1]]}]])]


def hist(*lines: str, tail: str = "\n") -> str:
    return "\n".join(lines) + tail


def bad_line(line: str) -> str:
    """A good history with one bad line in the middle."""
    return hist(GOOD[0], GOOD[1], line, GOOD[2], GOOD[3])


def _fifo(case_dir: Path) -> None:
    os.mkfifo(case_dir / "fifo.toml")


RUN = ["run", "--no-progress", "--store", "store"]
#: a broker with no metadata store and no controller role, that serves no transactions
ONE_PROCESS = """name = "solo"
features = ["consumer-groups", "idempotence"]

[[process]]
name = "broker"
roles = ["broker", "coordinator"]
ports = [9092]
capabilities = ["kill", "pause", "net"]
pid_file = "/run/solo.pid"
start = "solo-broker --daemon"
"""


def system_file(**changes: str | None) -> str:
    """ONE_PROCESS with lines replaced (key -> new line, or None to drop the key's line)."""
    lines = ONE_PROCESS.splitlines()
    for key, line in changes.items():
        i = next(i for i, ln in enumerate(lines) if ln.startswith(f"{key} ="))
        if line is None:
            del lines[i]
        else:
            lines[i] = line
    return "\n".join(lines) + "\n"


SOLO = "process:solo.toml"


CASES: list[Case] = [
    # --- systems under test: names, files and what a system cannot act out ----------------------
    Case("run-system-unknown", [*RUN, "--system", "kafka9"], 3, "unknown system 'kafka9'; choose one of: logbroker"),
    Case("run-system-file-missing", [*RUN, "--system", "process:nope.toml"], 3, "nope.toml does not exist"),
    Case("run-system-not-toml", [*RUN, "--system", SOLO], 3, "solo.toml is not valid TOML: Invalid value (at line 1",
         files={"solo.toml": "name = \n"}),
    Case("run-system-missing-key", [*RUN, "--system", SOLO], 3, "solo.toml:4: [[process]] #1 has no 'start'",
         files={"solo.toml": system_file(start=None)}),
    Case("run-system-mistyped-key", [*RUN, "--system", SOLO], 3,
         "solo.toml:9: unknown key 'pid-file' in [[process]] #1; did you mean 'pid_file'?",
         files={"solo.toml": system_file(pid_file='pid-file = "/run/solo.pid"')}),
    Case("run-system-wrong-type", [*RUN, "--system", SOLO], 3,
         "solo.toml:7: ports in [[process]] #1 must be a list of integers, not '9092'",
         files={"solo.toml": system_file(ports='ports = "9092"')}),
    Case("run-system-unknown-role", [*RUN, "--system", SOLO], 3, "solo.toml:6: unknown role 'leader' in [[process]] #1",
         files={"solo.toml": system_file(roles='roles = ["broker", "leader"]')}),
    Case("run-system-no-metadata-store", [*RUN, "--system", SOLO, "--nemesis", "partition-zookeeper"], 3,
         "system solo cannot act out nemesis partition-zookeeper: it has no metadata-store process the harness "
         "can cut off", files={"solo.toml": ONE_PROCESS}),
    Case("run-system-no-controller", [*RUN, "--system", SOLO, "--nemesis", "kill-controller"], 3,
         "system solo cannot act out nemesis kill-controller: it has no controller process the harness can kill",
         files={"solo.toml": ONE_PROCESS}),
    Case("run-system-no-clock", [*RUN, "--system", SOLO, "--nemesis", "clock"], 3,
         "system solo cannot act out nemesis clock-bump: it has no broker process the harness can skew the clock of",
         files={"solo.toml": ONE_PROCESS}),
    Case("run-system-no-txn", [*RUN, "--system", SOLO, "--txn"], 3,
         "system solo does not serve transactions, which the txn workload with these settings needs",
         files={"solo.toml": ONE_PROCESS}),
    Case("run-system-no-bugs", [*RUN, "--system", SOLO, "--bug", "truncate-to-hw"], 3,
         "system solo has no bug switches", files={"solo.toml": ONE_PROCESS}),
    Case("run-system-not-on-sim", [*RUN, "--system", SOLO, "--provisioner", "sim"], 3,
         "system solo runs on the docker, ssh provisioner(s), not sim", files={"solo.toml": ONE_PROCESS}),
    # --- chaos run: flags, refused before anything starts ------------------------------------
    *[Case(f"run-{name}", [*RUN, *args], 3, says) for name, args, says in [
        ("nodes-0", ["--nodes", "0"], "nodes must be between 1 and 32"),
        ("nodes-negative", ["--nodes", "-1"], "nodes must be between 1 and 32"),
        ("nodes-too-many", ["--nodes", "33"], "nodes must be between 1 and 32"),
        ("nodes-word", ["--nodes", "three"], "'three' is not a valid integer"),
        ("nodes-fraction", ["--nodes", "3.5"], "is not a valid integer"),
        ("time-limit-nan", ["--time-limit", "nan"], "time-limit must be a finite number"),
        ("time-limit-inf", ["--time-limit", "inf"], "time-limit must be a finite number"),
        ("time-limit-negative", ["--time-limit", "-5"], "time-limit must be between 1 and 86400"),
        ("time-limit-zero", ["--time-limit", "0"], "time-limit must be between 1 and 86400"),
        ("time-limit-huge", ["--time-limit", "1e9"], "time-limit must be between 1 and 86400"),
        ("time-limit-word", ["--time-limit", "soon"], "is not a valid float"),
        ("rate-nan", ["--rate", "nan"], "rate must be a finite number"),
        ("rate-inf", ["--rate", "inf"], "rate must be a finite number"),
        ("rate-zero", ["--rate", "0"], "rate must be between"),
        ("rate-negative", ["--rate", "-1"], "rate must be between"),
        ("interval-tiny", ["--nemesis-interval", "1e-9"], "nemesis-interval must be between 0.5"),
        ("interval-zero", ["--nemesis-interval", "0"], "nemesis-interval must be between 0.5"),
        ("interval-nan", ["--nemesis-interval", "nan"], "nemesis-interval must be a finite number"),
        ("concurrency-0", ["--concurrency", "0"], "concurrency must be between 1 and 256"),
        ("concurrency-huge", ["--concurrency", "1000"], "concurrency must be between 1 and 256"),
        ("partitions-0", ["--partitions", "0"], "partitions must be between 1 and 256"),
        ("partitions-1000", ["--partitions", "1000"], "partitions must be between 1 and 256"),
        ("seed-negative", ["--seed", "-1"], "seed must be between 0"),
        ("seed-word", ["--seed", "abc"], "is not a valid integer"),
        ("seed-huge", ["--seed", str(2**64)], "seed must be between 0"),
        ("acks-2", ["--acks", "2"], "acks must be all, 1 or 0"),
        ("acks-none", ["--acks", "none"], "acks must be all, 1 or 0"),
        ("acks-1-idempotent", ["--acks", "1"], "cannot be used with idempotent producers"),
        ("acks-0-idempotent", ["--acks", "0"], "cannot be used with idempotent producers"),
        ("rf-above-nodes", ["--nodes", "3", "--replication-factor", "4"], "needs at least that many nodes"),
        ("min-insync-above-rf", ["--replication-factor", "2", "--min-insync", "3"], "cannot exceed the replication"),
        ("rf-0", ["--replication-factor", "0"], "replication-factor must be between 1"),
        ("bug-unknown", ["--bug", "all-of-them"], "unknown bug switch 'all-of-them'"),
        ("nemesis-unknown", ["--nemesis", "partition,meteor"],
         "unknown nemesis 'meteor'; the families are partition, pause,"),
        ("nemesis-kind-unknown", ["--nemesis", "partition-sideways"],
         "unknown nemesis 'partition-sideways'; did you mean"),
        ("nemesis-typo", ["--nemesis", "kil"], "did you mean kill? `chaos nemeses` lists every kind"),
        ("workload-unknown", ["--workload", "bank"], "unknown workload 'bank'"),
        ("provisioner-unknown", ["--provisioner", "cloud"], "unknown provisioner 'cloud'"),
        ("ssh-without-hosts", ["--provisioner", "ssh"], "needs --hosts FILE"),
        ("ssh-missing-hosts", ["--provisioner", "ssh", "--hosts", "nope.txt"], "hosts file nope.txt does not exist"),
        ("name-climbs", ["--name", "../.."], "test name '../..' is not allowed"),
        ("name-space", ["--name", "my test"], "test name 'my test' is not allowed"),
        ("name-slash", ["--name", "a/b"], "test name 'a/b' is not allowed"),
        ("name-dot", ["--name", "."], "test name '.' is not allowed"),
        ("name-long", ["--name", "x" * 100], "is not allowed"),
        ("cluster-climbs", ["--cluster", "../x"], "cluster name '../x' is not allowed"),
        ("cluster-empty", ["--cluster", ""], "cluster name '' is not allowed"),
        ("cluster-space", ["--cluster", "my cluster"], "is not allowed"),
        ("topic-dots", ["--topic", ".."], "topic '..' is not allowed"),
        ("topic-space", ["--topic", "a b"], "topic 'a b' is not allowed"),
        ("recovery-0", ["--recovery-timeout", "0"], "recovery-timeout must be between 1"),
        ("recovery-nan", ["--recovery-timeout", "nan"], "recovery-timeout must be a finite number"),
        ("unknown-flag", ["--frobnicate"], "No such option '--frobnicate'"),
        ("test-count-0", ["--test-count", "0"], "0 is not in the range"),
        ("store-is-a-file", ["--store", "afile"], "store afile exists and is not a directory"),
    ]],
    Case("run-ssh-clock", [*RUN, "--provisioner", "ssh", "--hosts", "hosts.txt", "--nemesis", "clock"], 3,
         "needs libfaketime", files={"hosts.txt": "n1 10.0.0.1\n"}),
    # --- chaos run --config -------------------------------------------------------------------
    *[Case(f"config-{name}", [*RUN, "--config", "c.toml"], 3, says, files={"c.toml": body}) for name, body, says in [
        ("invalid-toml", "nodes = = 3\n", "is not valid TOML"),
        ("unknown-key", 'colour = "blue"\n', "unknown run setting(s): colour"),
        ("nodes-string", 'nodes = "three"\n', "nodes must be an integer, not 'three'"),
        ("nodes-float", "nodes = 3.5\n", "nodes must be an integer, not 3.5"),
        ("nodes-bool", "nodes = true\n", "nodes must be an integer, not True"),
        ("seed-string", 'seed = "abc"\n', "seed must be an integer"),
        ("leave-running-string", 'leave_running = "no"\n', "leave-running must be true or false"),
        ("time-limit-nan", "time-limit = nan\n", "time-limit must be a finite number"),
        ("time-limit-inf", "time-limit = inf\n", "time-limit must be a finite number"),
        ("rate-string", 'rate = "fast"\n', "rate must be a number"),
        ("extra-bad-key", '[extra]\n"a b" = "1"\n', "is not a config key"),
        ("extra-list", "[extra]\nx = [1, 2]\n", "must be a one-line string or an integer"),
        ("extra-newline", '[extra]\nx = "1\\ny=2"\n', "must be a one-line string"),
        ("nemesis-number", "nemesis = 5\n", "nemesis must be a list of names"),
        ("bugs-numbers", "bugs = [1]\n", "bugs must be a list of names"),
        ("acks-number", "acks = 2\n", "acks must be all, 1 or 0"),
        ("acks-1-toml", "acks = 1\n", "cannot be used with idempotent producers"),
        ("idempotence-string", 'idempotence = "yes"\n', "idempotence must be true or false"),
        ("name-climbs", 'name = "../../x"\n', "test name '../../x' is not allowed"),
        ("extra-not-table", 'extra = "x"\n', "extra must be a table"),
    ]],
    Case("config-missing", [*RUN, "--config", "nope.toml"], 3, "config file nope.toml does not exist"),
    Case("config-directory", [*RUN, "--config", "adir"], 3, "is not a regular file"),
    Case("config-fifo", [*RUN, "--config", "fifo.toml"], 3, "is not a regular file", setup=_fifo),
    Case("config-binary", [*RUN, "--config", "c.toml"], 3, "is not UTF-8 text", files={"c.toml": b"\xff\xfe\x00\x01"}),
    Case("config-huge", [*RUN, "--config", "c.toml"], 3, "at most 1 MiB", files={"c.toml": "#" * (2 << 20)}),
    # --- chaos check ----------------------------------------------------------------------------
    Case("check-missing", ["check", "nope"], 3, "nope does not exist"),
    Case("check-dir-without-history", ["check", "adir"], 3, "has no history.jsonl"),
    Case("check-out-is-a-file", ["check", "h/history.jsonl", "--out", "afile"], 3, "exists and is not a directory",
         files={"h/history.jsonl": hist(*GOOD)}),
    Case("check-out-unwritable", ["check", "h/history.jsonl", "--out", "/proc/chaos-out"], 6, "cannot create",
         files={"h/history.jsonl": hist(*GOOD)}),
    Case("check-results-json-is-a-dir", ["check", "h"], 3, "results.json exists and is not a file",
         files={"h/history.jsonl": hist(*GOOD), "h/results.json/x": "keep"}),
    # nothing sent or polled: invalid, as Jepsen's checker judges an empty history (empty-transaction-graph)
    Case("check-empty", ["check", "h"], 1, "holds no send, poll or txn op", files={"h/history.jsonl": ""}),
    Case("check-blank", ["check", "h"], 1, "holds no send, poll or txn op", files={"h/history.jsonl": "\n  \n\n"}),
    Case("check-nemesis-only", ["check", "h"], 1, "holds no send, poll or txn op",
         files={"h/history.jsonl": hist(_op(0, "nemesis", "info", "start-kill", {}))}),
    # a mistake of the user's or this machine's is never a harness bug (exit 7)
    Case("check-spark-master-bogus", ["check", "--spark-master", "bogus://x", "h"], 3, "is not a Spark master URL",
         files={"h/history.jsonl": hist(*GOOD)}),
    Case("check-java-home-nowhere", ["check", "h"], 6, "JAVA_HOME=/nowhere holds no bin/java",
         files={"h/history.jsonl": hist(*GOOD)}, env={"JAVA_HOME": "/nowhere", "CHAOS_CHECK_SERVER": "0"}),
    Case("check-elle-cli-unterminated", ["check", "--elle-cli", '"unterminated', "h"], 3,
         "--elle-cli '\"unterminated' is not a command line (No closing quotation)",
         files={"h/history.jsonl": hist(*GOOD)}),
    Case("check-test-json-list", ["check", "h"], 2, "holds a list",
         files={"h/history.jsonl": hist(*GOOD), "h/test.json": "[1, 2]"}),
    Case("check-test-json-garbage", ["check", "h"], 2, "is not readable JSON",
         files={"h/history.jsonl": hist(*GOOD), "h/test.json": "{nope"}),
    Case("check-test-json-config-list", ["check", "h"], 2, "config is not a JSON object",
         files={"h/history.jsonl": hist(*GOOD), "h/test.json": '{"config": [1]}'}),
    *[Case(f"check-{name}", ["check", "h"], 2, says, files={"h/history.jsonl": body}) for name, body, says in [
        ("garbage", bad_line("not json at all"), "line 3: not JSON"),
        ("torn-middle", bad_line('{"index": 2, "time": 3, "pro'), "line 3: not JSON"),
        ("nan-value", bad_line('{"index":2,"time":20,"process":2,"type":"invoke","f":"send","value":[["send",0,NaN]]}'),
         "line 3: not JSON"),
        ("huge-value", bad_line(_op(2, 2, "invoke", "send", [["send", 0, 10**30]])), "out of range"),
        ("float-value", bad_line(_op(2, 2, "invoke", "send", [["send", 0, 1.5]])), "must be an integer, not 1.5"),
        ("string-value", bad_line(_op(2, 2, "invoke", "send", [["send", 0, "7"]])), "must be an integer, not '7'"),
        ("string-key", bad_line(_op(2, 2, "invoke", "send", [["send", "0", 7]])), "key must be an integer"),
        ("negative-key", bad_line(_op(2, 2, "invoke", "send", [["send", -1, 7]])), "out of range"),
        ("send-short", bad_line(_op(2, 2, "invoke", "send", [["send", 0]])), "must be ['send', key, value]"),
        ("send-in-poll-op", bad_line(_op(2, 2, "invoke", "poll", [["send", 0, 9]])), "inside a 'poll' op"),
        ("empty-mops", bad_line(_op(2, 2, "invoke", "send", [])), "non-empty list of micro-ops"),
        ("value-missing", bad_line(json.dumps({"index": 2, "time": 20, "process": 2, "type": "invoke", "f": "send"})),
         "must have a value"),
        ("mop-unknown", bad_line(_op(2, 2, "invoke", "send", [["append", 0, 9]])), "must be a micro-op"),
        ("index-huge", hist(*GOOD, _op(10**30, 5, "invoke", "poll", [["poll"]])), "index 10000000000000000000"),
        ("index-bool", hist(GOOD[0], GOOD[1], json.dumps({"index": True, "time": 1, "process": 3,
                                                           "type": "invoke", "f": "poll", "value": [["poll"]]})),
         "index must be an integer"),
        ("index-string", bad_line(json.dumps({"index": "2", "time": 20, "process": 2, "type": "invoke", "f": "poll",
                                              "value": [["poll"]]})), "index must be an integer"),
        ("time-string", bad_line(json.dumps({"index": 2, "time": "20", "process": 2, "type": "invoke", "f": "poll",
                                             "value": [["poll"]]})), "time must be an integer"),
        ("time-float", bad_line(json.dumps({"index": 2, "time": 2.5, "process": 2, "type": "invoke", "f": "poll",
                                            "value": [["poll"]]})), "time must be an integer"),
        ("time-negative", bad_line(_op(2, 2, "invoke", "poll", [["poll"]]).replace('"time": 20', '"time": -5')),
         "time -5 is out of range"),
        ("process-word", bad_line(_op(2, "x", "invoke", "poll", [["poll"]])), "process"),
        ("process-float", bad_line(_op(2, 2.0, "invoke", "poll", [["poll"]])), "process"),
        ("type-unknown", bad_line(_op(2, 2, "maybe", "poll", [["poll"]])), "is not one of invoke, ok, fail, info"),
        ("f-unknown", bad_line(_op(2, 2, "invoke", "frobnicate", [["poll"]])), "f 'frobnicate' is not a client op"),
        ("f-number", bad_line(_op(2, 2, "invoke", 7, [["poll"]])), "f must be a string"),
        ("final-string", bad_line(_op(2, 2, "invoke", "poll", [["poll"]], final="yes")), "final must be true or false"),
        ("ok-send-string-offset", hist(GOOD[0], _op(1, 0, "ok", "send", [["send", 0, ["0", 1]]])),
         "offset must be an integer"),
        ("poll-map-not-list", hist(GOOD[2], _op(1, 1, "ok", "poll", [["poll", {"0": 5}]])),
         "must be a list of [offset, value] pairs"),
        ("poll-map-bad-key", hist(GOOD[2], _op(1, 1, "ok", "poll", [["poll", {"x": [[0, 1]]}]])),
         "has key 'x', which is not a key number"),
        ("poll-map-negative-key", hist(GOOD[2], _op(1, 1, "ok", "poll", [["poll", {"-1": [[0, 1]]}]])),
         "which is not a key number"),
        ("poll-pair-of-three", hist(GOOD[2], _op(1, 1, "ok", "poll", [["poll", {"0": [[0, 1, 2]]}]])),
         "must be an [offset, value] pair"),
        ("poll-result-on-invoke", hist(_op(0, 1, "invoke", "poll", [["poll", {"0": [[0, 1]]}]])),
         "line 1: value[0] of an invoke must be ['poll']"),
        ("poll-offset-nan-string", hist(GOOD[2], _op(1, 1, "ok", "poll", [["poll", {"0": [["NaN", 1]]}]])),
         "offset must be an integer"),
        ("completion-without-invoke", hist(_op(0, 0, "ok", "send", [["send", 0, [0, 1]]])),
         "completion for process 0 without an invoke"),
        ("double-invoke", hist(GOOD[0], _op(1, 0, "invoke", "poll", [["poll"]])), "invokes again"),
        ("index-decreasing", hist(GOOD[0], GOOD[1], _op(1, 2, "invoke", "poll", [["poll"]])), "does not increase"),
        ("completion-other-f", hist(GOOD[0], _op(1, 0, "ok", "poll", [["poll", {}]])), "completes a 'send' invoke"),
        ("completion-other-value", hist(GOOD[0], _op(1, 0, "ok", "send", [["send", 0, [0, 2]]])),
         "line 2: value[0] sends 2 to key 0, which its invoke (line 1) did not send"),
        ("completion-more-sends", hist(GOOD[0], _op(1, 0, "ok", "send", [["send", 0, [0, 1]], ["send", 0, [1, 2]]])),
         "line 2: value[1] sends 2 to key 0, which its invoke (line 1) did not send"),
        ("completion-drops-a-send", hist(_op(0, 0, "invoke", "send", [["send", 0, 1], ["send", 1, 2]]),
                                         _op(1, 0, "ok", "send", [["send", 0, [0, 1]]])),
         "line 2: completes without the send of 2 to key 1 that its invoke (line 1) made"),
        # transactions (issue 29's must-show bad input): one sentence each, with the line
        ("txn-unknown-mop", hist(_op(0, 0, "invoke", "txn", [["send", 0, 1], ["append", 0, 9]])),
         "line 1: value[1] is an unknown micro-op 'append'"),
        ("txn-send-offset-not-integer", hist(_op(0, 0, "invoke", "txn", [["send", 0, 1], ["poll"]]),
                                             _op(1, 0, "ok", "txn", [["send", 0, ["7", 1]], ["poll", {}]])),
         "line 2: value[0] offset must be an integer, not '7'"),
        ("txn-completion-extra-send", hist(_op(0, 0, "invoke", "txn", [["send", 0, 1], ["poll"]]),
                                           _op(1, 0, "ok", "txn", [["send", 0, [0, 1]], ["poll", {}],
                                                                   ["send", 1, [0, 5]]])),
         "line 2: value[2] sends 5 to key 1, which its invoke (line 1) did not send"),
        ("assign-string-key", bad_line(_op(2, 2, "invoke", "assign", ["0"])), "value[0] must be an integer"),
        ("assign-not-list", bad_line(_op(2, 2, "invoke", "assign", 0)), "must be a list of keys"),
        ("line-is-array", bad_line("[1, 2, 3]"), "an op must be a JSON object, not list"),
        ("line-is-number", bad_line("7"), "an op must be a JSON object, not int"),
        ("lacks-type", bad_line(json.dumps({"index": 2, "time": 20, "process": 2, "f": "poll", "value": []})),
         "the op lacks type"),
        ("deeply-nested", bad_line("[" * 100_000 + "]" * 100_000), "line 3"),
    ]],
    Case("check-invalid-utf8", ["check", "h"], 2, "line 4: not JSON",
         files={"h/history.jsonl": (hist(GOOD[0], GOOD[1]) + "\n").encode() + b'{"index": 2, "\xff\xfe"}\n'}),
    # --- chaos replay ---------------------------------------------------------------------------
    Case("replay-missing", ["replay", "nope"], 3, "has no test.json"),
    Case("replay-no-test-json", ["replay", "adir"], 3, "has no test.json"),
    Case("replay-corrupt", ["replay", "r"], 2, "is not readable JSON", files={"r/test.json": "{{{"}),
    Case("replay-list", ["replay", "r"], 2, "has no run configuration", files={"r/test.json": "[]"}),
    Case("replay-no-config", ["replay", "r"], 2, "has no run configuration", files={"r/test.json": "{}"}),
    Case("replay-string-seed", ["replay", "r"], 3, "seed must be an integer",
         files={"r/test.json": json.dumps({"config": {"seed": "42"}})}),
    Case("replay-unknown-key", ["replay", "r"], 3, "unknown run setting(s): colour",
         files={"r/test.json": json.dumps({"config": {"colour": "blue"}})}),
    Case("replay-bad-nodes", ["replay", "r"], 3, "nodes must be between 1 and 32",
         files={"r/test.json": json.dumps({"config": {"nodes": 0}})}),
    Case("replay-name-climbs", ["replay", "r"], 3, "test name '../..' is not allowed",
         files={"r/test.json": json.dumps({"config": {"name": "../.."}})}),
    # --- chaos cluster / heal -------------------------------------------------------------------
    *[Case(f"cluster-{name}", ["cluster", *args], 3, says) for name, args, says in [
        ("down-climbs", ["down", "--name", "../.."], "cluster name '../..' is not allowed"),
        ("down-empty", ["down", "--name", ""], "cluster name '' is not allowed"),
        ("down-dot", ["down", "--name", "."], "cluster name '.' is not allowed"),
        ("down-slash", ["down", "--name", "a/b"], "cluster name 'a/b' is not allowed"),
        ("down-long", ["down", "--name", "y" * 60], "is not allowed"),
        ("up-climbs", ["up", "--name", "../x"], "cluster name '../x' is not allowed"),
        ("up-nodes-0", ["up", "--nodes", "0"], "--nodes must be at least 1"),
        ("up-provisioner", ["up", "--provisioner", "cloud"], "unknown provisioner 'cloud'"),
        ("up-ssh-missing-hosts", ["up", "--provisioner", "ssh", "--hosts", "nope.txt"], "does not exist"),
        ("status-climbs", ["status", "--name", "../.."], "is not allowed"),
        ("health-slash", ["health", "--name", "a/"], "is not allowed"),
        ("exec-not-up", ["exec", "--name", "ghost", "n1", "true"], "cluster 'ghost' is not up"),
        ("exec-climbs", ["exec", "--name", "../..", "n1", "true"], "is not allowed"),
        ("exec-timeout-negative", ["exec", "--timeout", "-1", "n1", "true"], "'--timeout': -1.0 is not in the range"),
        ("exec-timeout-zero", ["exec", "--timeout", "0", "n1", "true"], "'--timeout': 0.0 is not in the range"),
        ("exec-timeout-nan", ["exec", "--timeout", "nan", "n1", "true"], "'nan' is not a finite number"),
        ("unknown-command", ["explode"], "No such command 'explode'"),
    ]],
    Case("cluster-up-nodes-51", ["cluster", "up", "--nodes", "51", "--name", "big"], 3,
         "--nodes must be between 1 and 50",
         env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"}),
    Case("detect-time-limit-nan", ["detect", "--time-limit", "nan"], 3, "'nan' is not a finite number"),
    Case("sim-search-interval-inf", ["sim-search", "--nemesis-interval", "inf"], 3, "'inf' is not a finite number"),
    Case("heal-climbs", ["heal", "--name", "../.."], 3, "cluster name '../..' is not allowed"),
    Case("heal-not-up", ["heal", "--name", "ghost"], 3, "cluster 'ghost' is not up"),
    Case("chaos-home-is-a-file", ["cluster", "status"], 6, "is not a directory", env={"CHAOS_HOME": "HOME/afile"}),
    Case("cluster-corrupt-state", ["cluster", "exec", "--name", "broken", "n1", "true"], 6, "is unreadable",
         env={"CHAOS_HOME": "HOME/.chaos"}),
]


def _digest(root: Path) -> dict[str, str]:
    """Every file (and link) under root, with a hash of its content (or link target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[rel] = "dir"
    return out


def _sentinel(root: Path) -> tuple[Path, Path]:
    """A fake home with CHAOS_HOME, another cluster's state, a user file; a store with another run."""
    home = root / "home"
    state = home / ".chaos" / "clusters" / "keep"
    state.mkdir(parents=True)
    (state / "id_ed25519").write_text("a key that must survive")
    (state / "nodes.json").write_text(json.dumps({"provisioner": "docker", "nodes": []}))
    broken = home / ".chaos" / "clusters" / "broken"
    broken.mkdir()
    (broken / "nodes.json").write_text("{not json")
    (home / "important.txt").write_text("do not delete")
    (home / "afile").write_text("not a directory")
    run = root / "work" / "store" / "queue" / "20260101T000000-1"
    (run / "perf").mkdir(parents=True)
    (run / "history.jsonl").write_text(hist(*GOOD))
    (run / "results.json").write_text('{"valid": true}')
    (run / "perf" / "faults.json").write_text("[]")
    (root / "work" / "store" / "latest").write_text("a file the user keeps here")
    return home, root / "work"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    home, work = _sentinel(tmp_path)
    case_dir = work
    (case_dir / "adir").mkdir()
    (case_dir / "afile").write_text("x")
    for rel, body in case.files.items():
        p = case_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        (p.write_bytes if isinstance(body, bytes) else p.write_text)(body)  # type: ignore[operator]
    if case.setup is not None:
        case.setup(case_dir)
    before = _digest(tmp_path)
    env = {**os.environ, "HOME": str(home), "CHAOS_HOME": str(home / ".chaos"),
           "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    env.update({k: v.replace("HOME", str(home)) for k, v in case.env.items()})
    res = subprocess.run([CHAOS, *case.argv], cwd=case_dir, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == case.code, f"exit {res.returncode}, wanted {case.code}: {res.stderr[-1500:]}"
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr[-3000:]
    verdict = case.code in (0, 1, 2) and lines and lines[-1].split()[0] in ("VALID", "INVALID", "UNKNOWN")
    assert lines and (lines[-1].startswith("chaos: ") or verdict), res.stderr[-1500:]
    said = " ".join(res.stderr.split()) if verdict else lines[-1]  # a verdict says why above its last line
    assert case.says in said, f"wanted {case.says!r} in: {said[-500:]}"
    after = _digest(tmp_path)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    # a check may write its verdict beside the history it was given ("unknown" for an empty one), nothing else
    assert not (changed - {"work/h/results.json"}), f"the tree changed: {sorted(changed)}"


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 100 and len({c.id for c in CASES}) == len(CASES)
