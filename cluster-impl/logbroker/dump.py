"""`python -m logbroker.dump [--log-dirs DIR] [--out DIR]`: every local replica's log as JSON Lines.

One file per replica, `<topic>-<partition>.jsonl`. The first line is a summary,
`{"topic", "partition", "hw", "leo", "log_start_offset", "leader_epochs": [[epoch, start], ...]}`;
then one line per record, `{"offset", "epoch", "value", "key", "crc", "timestamp"}`, where `epoch`
is the partition leader epoch of its batch, `crc` the batch's CRC-32C and `value`/`key` the UTF-8
text of the bytes (or base64 with `"value_b64": true` when not UTF-8). Only offsets below `hw`
are committed. Records of transactional batches carry `"producer_id"` and `"txn": true`; the
transaction markers (control batches, which hold no data) are not record lines but listed in the
summary as `"markers": [[offset, "commit" | "abort", producer_id], ...]`, so a reader can tell
committed from aborted records. With `--probes-dir`, the coverage probe counts the broker's processes
wrote there (`logbroker.probes`) are summed into `probes.json` beside the dumps: `{"counts": {name: n},
"processes": n, "probes": {name: description}, "bug_probes": {switch: name}}`. It reads the files
directly, so it works on a stopped broker's data directory; a torn tail is reported (`"torn_bytes"`) but
not repaired. Internal topics (`__consumer_offsets`, the group coordinator's JSON records) are left out
unless `--internal` is given: a run's checks read every dumped file as the workload's data.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatch

from logbroker.core.partition import TopicPartition
from logbroker.log.batch import CorruptBatch, iter_batches
from logbroker.log.checkpoint import read_int
from logbroker.log.control import read_marker
from logbroker.log.epoch_cache import LeaderEpochCache
from logbroker.log.log import EPOCH_FILE, HW_FILE, START_FILE
from logbroker.probes import node_file, read_dir

PROBES_FILE = "probes.json"


def _text(b: bytes | None, field: str) -> dict[str, Any]:
    if b is None:
        return {field: None}
    try:
        return {field: b.decode("utf-8")}
    except UnicodeDecodeError:
        return {field: base64.b64encode(b).decode(), f"{field}_b64": True}


def dump_partition(d: Path) -> list[dict[str, Any]]:
    tp = TopicPartition.parse(d.name)
    records: list[dict[str, Any]] = []
    markers: list[list[Any]] = []
    torn = 0
    leo = 0
    log_start: int | None = None
    for seg in sorted(d.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        try:
            for pos_, h in iter_batches(data):
                pos = pos_ + h.size
                if log_start is None:
                    log_start = h.base_offset
                leo = h.next_offset
                raw = bytes(data[pos_ : pos_ + h.size])
                if h.is_control:
                    m = read_marker(raw, h)
                    markers.append([h.base_offset, "?" if m is None else "commit" if m.commit else "abort",
                                    h.producer_id])
                    continue
                txn = {"producer_id": h.producer_id, "txn": True} if h.is_transactional else {}
                for rec in DefaultRecordBatch(raw):
                    records.append({"offset": rec.offset, "epoch": h.leader_epoch, **_text(rec.value, "value"),
                                    **_text(rec.key, "key"), "crc": h.crc, "timestamp": rec.timestamp, **txn})
        except CorruptBatch:
            torn += len(data) - pos
            break
    summary: dict[str, Any] = {
        "topic": tp.topic, "partition": tp.partition, "hw": min(read_int(d / HW_FILE, 0), leo), "leo": leo,
        "log_start_offset": max(log_start or 0, min(read_int(d / START_FILE, 0), leo)),
        "leader_epochs": [list(e) for e in
                          LeaderEpochCache(d / EPOCH_FILE if (d / EPOCH_FILE).exists() else None).entries],
    }
    if markers:
        summary["markers"] = markers
    if torn:
        summary["torn_bytes"] = torn
    return [summary, *records]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="logbroker.dump", description=__doc__.split("\n")[0])
    ap.add_argument("--log-dirs", type=Path, default=Path("/var/lib/logbroker"))
    ap.add_argument("--out", type=Path, help="directory for the .jsonl files (default: stdout)")
    ap.add_argument("--internal", action="store_true", help="dump internal topics (names starting __) too")
    ap.add_argument("--probes-dir", type=Path, help="sum the probe counts found here into OUT/probes.json")
    args = ap.parse_args(argv)
    if not args.log_dirs.is_dir():
        print(f"logbroker.dump: {args.log_dirs} is not a directory", file=sys.stderr)
        return 2
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for d in sorted(p for p in args.log_dirs.iterdir() if p.is_dir() and p.name.rpartition("-")[2].isdigit()
                    and (args.internal or not p.name.startswith("__"))):
        lines = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in dump_partition(d))
        if args.out:
            (args.out / f"{d.name}.jsonl").write_text(lines)
        else:
            sys.stdout.write(lines)
    if args.probes_dir and args.out:
        n = len(list(args.probes_dir.glob("probes-*.json"))) if args.probes_dir.is_dir() else 0
        (args.out / PROBES_FILE).write_text(json.dumps(node_file(read_dir(args.probes_dir), n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
