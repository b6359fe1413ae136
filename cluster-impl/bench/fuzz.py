"""`make bench-fuzz`: a million hostile frames against one standalone broker. A benchmark, not a test.

Kinds of frame, from a seeded generator:
- a valid request header (a known API key at a version we serve) followed by a random body;
- a valid request cut short at a random point (the frame length says so: the body is truncated);
- a valid Produce whose record batch has one field corrupted — codec, record count, last offset
  delta, base offset, batch length, magic, attributes (transactional/control), a record byte, or the
  CRC — with the CRC recomputed except when the CRC itself is the corruption, so that the checks
  after the CRC are what is exercised;
- transactions (issue 27): a transactional batch from one of each worker's producers, with its next
  sequence or a wrong one and its epoch or another; a WriteTxnMarkers (v0-2) ending one of those
  producers' transactions with a random result, producer epoch, coordinator epoch and partition; a
  control batch sent as a client's produce; and a read_committed Fetch from a random offset.
The broker runs with `transaction.kip890.enable=false` (there is no coordinator to verify against),
so transactional batches and markers reach the producer state, the LSO and the aborted index.
After each frame the client sends an ApiVersions as a sentinel on the same connection and reads
until the sentinel's answer (a frame that gets no response, e.g. acks=0, cannot stall it) or until
the broker closes the connection (counted as refused; the client reconnects).

Reported (JSON to --out): crashes (the broker process died; goal 0), per kind the frames answered,
refused (error code or closed connection) and accepted (error 0), the broker's RSS before, at its
peak and after, and whether a librdkafka consumer reads back every record of every accepted batch (read_uncommitted:
aborted ones too), and how far a read_committed one gets once every transaction has been aborted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import struct
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(HERE))
import crc32c  # noqa: E402
from brokerlib import BrokerProc  # noqa: E402
from kafka.protocol.consumer import FetchRequest  # noqa: E402
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest  # noqa: E402
from kafka.protocol.producer import ProduceRequest, ProduceResponse  # noqa: E402
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from logbroker.log.control import ControlMarker, marker_batch  # noqa: E402
from logbroker.protocol.apis import APIS, make_message  # noqa: E402
from rawclient import batch, produce_req  # noqa: E402

quiet = logging.getLogger("bench-quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
TOPIC = "fuzz"
SENTINEL = 0x7FFF0000
TXN_SHARE = 0.25  # of the frames, transactional ones (make_txn_frame)
FIELDS = ["codec", "record_count", "last_offset_delta", "base_offset", "batch_length", "magic", "transactional",
          "control", "record_byte", "crc"]


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header(key: int, version: int, corr: int) -> bytes:
    client = b"fuzz"
    return struct.pack(">hhih", key, version, corr, len(client)) + client + (b"\x00" if flexible(key, version) else b"")


def flexible(key: int, version: int) -> bool:
    return bool(APIS[key].request.flexible_version_q(version))


def sentinel() -> bytes:
    req = ApiVersionsRequest(version=0)
    req.with_header(correlation_id=SENTINEL, client_id="fuzz")
    return bytes(req.encode(header=True, framed=True))


def valid_requests() -> list[bytes]:
    """Whole, valid requests to truncate."""
    out = []
    for i, req in enumerate([
        produce_req(TOPIC, 0, batch([b"x" * 20, b"y"]), version=7),
        make_message(MetadataRequest, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                                          "include_cluster_authorized_operations": False,
                                          "include_topic_authorized_operations": False}),
        make_message(FetchRequest, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 16}]}]}),
        ApiVersionsRequest(version=3, client_software_name="fuzz", client_software_version="1"),
    ]):
        req.with_header(correlation_id=i + 1, client_id="fuzz")
        out.append(bytes(req.encode(header=True, framed=False)))
    return out


def corrupt(rng: random.Random, field: str) -> bytes:
    values = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 30))) for _ in range(rng.randint(1, 5))]
    b = bytearray(batch(values))
    if field == "codec":
        struct.pack_into(">h", b, 21, (struct.unpack_from(">h", b, 21)[0] & ~7) | rng.randint(1, 7))
    elif field == "record_count":
        struct.pack_into(">i", b, 57, rng.choice([0, -1, 2**31 - 1, rng.randint(2, 1000)]))
    elif field == "last_offset_delta":
        struct.pack_into(">i", b, 23, rng.choice([-1, 999, rng.randint(0, 10)]))
    elif field == "base_offset":
        struct.pack_into(">q", b, 0, rng.choice([1, -1, 2**62]))
    elif field == "batch_length":
        struct.pack_into(">i", b, 8, struct.unpack_from(">i", b, 8)[0] + rng.choice([-20, -1, 1, 1000]))
    elif field == "magic":
        b[16] = rng.choice([0, 1, 3, 255])
    elif field == "transactional":
        struct.pack_into(">h", b, 21, struct.unpack_from(">h", b, 21)[0] | 0x10)
    elif field == "control":
        struct.pack_into(">h", b, 21, struct.unpack_from(">h", b, 21)[0] | 0x20)
    elif field == "record_byte":
        i = rng.randrange(61, len(b))
        b[i] = rng.randrange(256)
    if field != "crc":
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    else:
        b[rng.randrange(21, len(b))] ^= 1 + rng.randrange(255)
    return bytes(b)


def produce_frame(records: bytes, corr: int) -> bytes:
    req = produce_req(TOPIC, 0, records, version=7)
    req.with_header(correlation_id=corr, client_id="fuzz")
    return bytes(req.encode(header=True, framed=True))


PRODUCERS_PER_WORKER = 4
TXN_ID = "fuzz-tx"


class Producers:
    """One worker's transactional producers: ids, epochs and next sequences as the worker believes."""

    def __init__(self, worker: int) -> None:
        self.ids = [1_000_000 + worker * PRODUCERS_PER_WORKER + i for i in range(PRODUCERS_PER_WORKER)]
        self.epoch = dict.fromkeys(self.ids, 0)
        self.seq = dict.fromkeys(self.ids, 0)

    def batch(self, rng: random.Random) -> tuple[str, bytes, int, int]:
        """(what is wrong with it, the batch, its producer, its record count)."""
        pid = rng.choice(self.ids)
        epoch, seq, wrong = self.epoch[pid], self.seq[pid], "none"
        x = rng.random()
        if x < 0.1:
            epoch, wrong = max(0, epoch + rng.choice([-1, 1, 5])), "epoch"
        elif x < 0.2:
            seq, wrong = rng.choice([0, seq + 1, seq + 7, 2**31 - 1]), "sequence"
        n = rng.randint(1, 5)
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                      producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
        for i in range(n):
            b.append(i, timestamp=None, key=None, value=b"t%d" % rng.randrange(10**6), headers=[])
        return wrong, bytes(b.build()), pid, n

    def accepted(self, pid: int, raw: bytes) -> None:
        epoch, seq, count = struct.unpack_from(">hii", raw, 51)
        self.epoch[pid] = max(self.epoch[pid], epoch)
        self.seq[pid] = seq + count

    def marker(self, rng: random.Random) -> tuple[bytes, int, int, int]:
        """A WriteTxnMarkers (v0-2) for one producer: (frame, version, producer id, producer epoch)."""
        pid = rng.choice(self.ids)
        epoch = self.epoch[pid] + rng.choice([0, 0, 0, 1, -1])
        version = rng.randint(APIS[27].min_version, APIS[27].max_version)
        body = {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": rng.random() < 0.5,
                             "coordinator_epoch": rng.choice([0, 0, 1, 5, -1]),
                             "transaction_version": rng.choice([0, 2]),
                             "topics": [{"name": rng.choice([TOPIC, TOPIC, "nope"]),
                                         "partition_indexes": [rng.choice([0, 0, 0, 1, -1])]}]}]}
        req = make_message(WriteTxnMarkersRequest, version, body)
        req.with_header(correlation_id=1, client_id="fuzz")
        return bytes(req.encode(header=True, framed=True)), version, pid, epoch

    def marked(self, pid: int, epoch: int) -> None:
        """A marker was accepted: a bumped epoch starts the producer's sequences again."""
        if epoch > self.epoch[pid]:
            self.epoch[pid], self.seq[pid] = epoch, 0


def txn_produce_frame(records: bytes, corr: int) -> bytes:
    req = make_message(ProduceRequest, 7, {"transactional_id": TXN_ID, "acks": -1, "timeout_ms": 5000,
                                           "topic_data": [{"name": TOPIC, "partition_data": [
                                               {"index": 0, "records": records}]}]})
    req.with_header(correlation_id=corr, client_id="fuzz")
    return bytes(req.encode(header=True, framed=True))


def committed_fetch(rng: random.Random) -> bytes:
    req = make_message(FetchRequest, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": rng.choice([1 << 10, 1 << 20]),
        "isolation_level": 1, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                    "fetch_offset": rng.randrange(0, 1 << 16), "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 16}]}]})
    req.with_header(correlation_id=1, client_id="fuzz")
    return bytes(req.encode(header=True, framed=True))


def make_txn_frame(rng: random.Random, producers: Producers) -> tuple[str, bytes, int, Any]:
    """A transactional frame: (kind, frame, records it adds if accepted, what to note if accepted)."""
    r = rng.random()
    if r < 0.5:
        wrong, records, pid, n = producers.batch(rng)
        return f"txn-batch-{wrong}", txn_produce_frame(records, 1), n, (pid, records)
    if r < 0.8:
        frame, version, pid, epoch = producers.marker(rng)
        return "txn-marker", frame, 0, (version, pid, epoch)
    if r < 0.9:
        pid = rng.choice(producers.ids)
        records = marker_batch(pid, producers.epoch[pid], ControlMarker(rng.random() < 0.5, 0), 0)
        return "client-control-batch", txn_produce_frame(records, 1), 0, None
    return "read-committed-fetch", committed_fetch(rng), 0, None


def make_frame(rng: random.Random, valid: list[bytes]) -> tuple[str, bytes, int]:
    """(kind, frame, records it adds if accepted)."""
    r = rng.random()
    if r < 0.4:
        key = rng.choice(list(APIS))
        api = APIS[key]
        body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        return "random-body", framed(header(key, rng.randint(api.min_version, api.max_version), 1) + body), 0
    if r < 0.6:
        whole = rng.choice(valid)
        return "truncated", framed(whole[: rng.randint(8, len(whole) - 1)]), 0
    field = rng.choice(FIELDS)
    records = corrupt(rng, field)
    count = struct.unpack_from(">i", records, 57)[0] if len(records) >= 61 else 0
    return f"batch-{field}", produce_frame(records, 1), count


async def read_frame(r: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await r.readexactly(4))[0]
    return await r.readexactly(size)


class Campaign:
    def __init__(self, port: int, frames: int, seed: int, workers: int) -> None:
        self.port, self.frames, self.seed, self.workers = port, frames, seed, workers
        self.counts: Counter[tuple[str, str]] = Counter()
        self.appended: dict[int, int] = {}  # base offset -> records, of every accepted batch
        self.sent = 0
        self.producers: list[Producers] = []

    @property
    def accepted_records(self) -> int:
        return sum(self.appended.values())

    async def run(self) -> None:
        await asyncio.gather(*(self.worker(i) for i in range(self.workers)))

    async def worker(self, i: int) -> None:
        rng = random.Random(self.seed * 1000 + i)
        valid = valid_requests()
        producers = Producers(i)
        self.producers.append(producers)
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while self.sent < self.frames:
            self.sent += 1
            note: Any = None
            if rng.random() < TXN_SHARE:
                kind, frame, records, note = make_txn_frame(rng, producers)
            else:
                kind, frame, records = make_frame(rng, valid)
            if conn is None:
                conn = await asyncio.open_connection("127.0.0.1", self.port)
            r, w = conn
            try:
                w.write(frame + sentinel())
                await w.drain()
                answer = None
                while True:
                    got = await asyncio.wait_for(read_frame(r), 30)
                    if struct.unpack_from(">i", got)[0] == SENTINEL:
                        break
                    answer = got
            except (asyncio.IncompleteReadError, ConnectionError):
                self.counts[(kind, "refused")] += 1
                w.close()
                conn = None
                continue
            if answer is None:
                self.counts[(kind, "no-answer")] += 1
            elif kind.startswith(("batch-", "txn-batch-", "client-control")):
                err = ProduceResponse.decode(answer, version=7, header=True).responses[0].partition_responses[0]
                if err.error_code == 0:
                    self.counts[(kind, "accepted")] += 1
                    if err.base_offset not in self.appended:  # a duplicate is answered its original offset
                        self.appended[err.base_offset] = records
                        if kind.startswith("txn-batch-"):
                            producers.accepted(*note)
                else:
                    self.counts[(kind, "refused")] += 1
            elif kind == "txn-marker":
                resp = WriteTxnMarkersResponse.decode(answer, version=note[0], header=True)
                code = resp.markers[0].topics[0].partitions[0].error_code
                self.counts[(kind, "accepted" if code == 0 else "refused")] += 1
                if code == 0:
                    producers.marked(note[1], note[2])
            else:
                self.counts[(kind, "answered")] += 1
        if conn is not None:
            conn[1].close()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def abort_all(port: int, producers: list[Producers]) -> int:
    """End every transaction the campaign left open (ABORT at each producer's epoch, from a coordinator
    epoch above any the campaign used); the markers refused."""
    import socket

    refused = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for ps in producers:
            for pid in ps.ids:
                req = make_message(WriteTxnMarkersRequest, 1, {"markers": [{
                    "producer_id": pid, "producer_epoch": ps.epoch[pid], "transaction_result": False,
                    "coordinator_epoch": 100, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]})
                req.with_header(correlation_id=2, client_id="fuzz")
                sock.sendall(bytes(req.encode(header=True, framed=True)))
                size = struct.unpack(">i", _exact(sock, 4))[0]
                resp = WriteTxnMarkersResponse.decode(_exact(sock, size), version=1, header=True)
                refused += resp.markers[0].topics[0].partitions[0].error_code != 0
    return refused


def _exact(sock: Any, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def committed_records(replica: Path) -> int:
    """What a read_committed reader must get, from the log itself (`logbroker.dump`): every record that
    is not transactional, or whose producer's next marker after it is a COMMIT."""
    from logbroker.dump import dump_partition

    summary, *records = dump_partition(replica)
    markers: dict[int, list[tuple[int, str]]] = {}
    for offset, kind, pid in summary.get("markers", []):
        markers.setdefault(pid, []).append((offset, kind))
    n = 0
    for r in records:
        if not r.get("txn"):
            n += 1
            continue
        after = [kind for offset, kind in markers.get(r["producer_id"], []) if offset > r["offset"]]
        n += bool(after) and after[0] == "commit"
    return n


def read_back(bootstrap: str, want: int, committed: bool) -> tuple[int, int]:
    """Records librdkafka returns from offset 0 (until `want`, or 20 s without any), and the last
    offset it returned."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz", "enable.auto.commit": False, "logger": quiet,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got, last = 0, -1
    idle_since = time.monotonic()
    try:
        while got < want and time.monotonic() - idle_since < 20:
            for m in c.consume(10000, 1.0):
                idle_since = time.monotonic()
                if m.error() is not None:
                    print(f"consumer error after offset {last}: {m.error()}", flush=True)
                    continue
                got, last = got + 1, m.offset()
    finally:
        c.close()
    if got < want:
        print(f"read {got} of {want} records ({'read_committed' if committed else 'read_uncommitted'}); the last "
              f"offset read was {last}", flush=True)
    return got, last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("bench-results/fuzz.json"))
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory() as d:
        b = BrokerProc(Path(d) / "data", overrides=["auto.create.topics.enable=false",
                                                    "transaction.kip890.enable=false"]).start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})
            for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                f.result(15)
            assert b.proc is not None
            before = rss_kb(b.proc.pid)
            campaign = Campaign(b.port, args.frames, args.seed, args.workers)
            peak = before
            t0 = time.perf_counter()

            async def run_and_watch() -> None:
                nonlocal peak
                task = asyncio.ensure_future(campaign.run())
                while not task.done():
                    await asyncio.sleep(1)
                    if not b.alive():
                        task.cancel()
                        break
                    peak = max(peak, rss_kb(b.proc.pid))  # type: ignore[union-attr]
                    if int(time.perf_counter() - t0) % 30 == 0:
                        print(f"{campaign.sent} frames, {time.perf_counter() - t0:.0f} s", flush=True)
                if not task.cancelled():
                    await task

            with contextlib.suppress(asyncio.CancelledError):
                asyncio.run(run_and_watch())
            elapsed = time.perf_counter() - t0
            crashed = not b.alive()
            after = rss_kb(b.proc.pid) if not crashed else 0
            unended = abort_all(b.port, campaign.producers) if not crashed else -1
            read, _ = read_back(b.bootstrap, campaign.accepted_records, committed=False) if not crashed else (-1, -1)
            read_committed, last_committed = (read_back(b.bootstrap, campaign.accepted_records, committed=True)
                                              if not crashed else (-1, -1))
            committed_expected = committed_records(Path(d) / "data" / f"{TOPIC}-0") if not crashed else -1
            tracebacks = b.log_text().count("Traceback")
            if tracebacks:  # each with the log line before it, which says what the broker was doing
                lines = b.log_text().splitlines()
                for i, line in enumerate(lines):
                    if line.startswith("Traceback"):
                        print("\n".join(lines[max(0, i - 1): i + 25]), flush=True)
        finally:
            b.kill()
    by_kind: dict[str, dict[str, int]] = {}
    for (kind, outcome), n in sorted(campaign.counts.items()):
        by_kind.setdefault(kind, {})[outcome] = n
    totals = Counter(outcome for (_, outcome) in campaign.counts.elements())
    res: dict[str, Any] = {
        "frames": campaign.sent, "seconds": round(elapsed, 1), "frames_per_s": round(campaign.sent / elapsed),
        "crashes": int(crashed), "broker_tracebacks_logged": tracebacks, "totals": dict(totals),
        "by_kind": by_kind, "rss_kb_before": before, "rss_kb_peak": peak, "rss_kb_after": after,
        "accepted_records": campaign.accepted_records, "records_read_back_by_librdkafka": read,
        "closing_aborts_refused": unended, "records_read_committed_by_librdkafka": read_committed,
        "committed_records_in_the_log": committed_expected,
        "last_offset_read_committed": last_committed,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    print(f"written to {args.out}")
    return 0 if not crashed else 1


if __name__ == "__main__":
    raise SystemExit(main())
