"""`SimKafkaClient`: a Kafka client's semantics over the brokers' decoded API, on the simulated network.

Model of the client (what librdkafka does for the queue workload, reduced to what the history can
tell apart):
- Metadata: learned from the bootstrap broker, then from any broker (seeded order); refreshed on
  NOT_LEADER, an unknown leader, a connection error or a timeout, and at least every second. As
  Kafka's clients since KIP-320: each partition's leader epoch is kept, a metadata answer with an
  older epoch than one already seen (from a broker with a stale view, a zombie) does not move the
  partition's leader back, and fetches carry the epoch (`current_leader_epoch`), so a deposed leader
  answers FENCED_LEADER_EPOCH (a metadata refresh) instead of serving or resetting the position.
- Producer (acks=all, idempotent by default): one producer id per client (InitProducerId); each
  partition's records carry consecutive sequence numbers, and a batch is retried unchanged (same
  sequence) after a retriable error or an unanswered request, until the delivery timeout. The
  outcome is `ok` with the offset, `fail` only when no attempt can have been written (every
  attempt was refused before the broker's append), and `info` otherwise (an attempt went
  unanswered, or its error may come after the append). NOT_LEADER_OR_FOLLOWER is such an error: a
  leader that appended, then lost leadership while the request waited for its ISR, answers it
  (Kafka's DelayedProduce does too), and the records may survive on the new leader — so, as for
  librdkafka and the Java client, it is retried but never proof that nothing was written. With
  acks=0 nothing is answered and the outcome is `info`.
- Consumer (assign mode): retained keys keep their position, new keys start at the log start;
  a poll long-polls the leaders (Fetch, no session) until records come or the poll timeout
  passes; OFFSET_OUT_OF_RANGE resets to the earliest offset (auto.offset.reset=earliest).
- Every request has a timeout: a request lost in a partition or held by a paused broker is an
  unknown outcome, never a hang.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from logbroker.log.batch import iter_batches
from logbroker.log.control import read_marker
from logbroker.log.validate import _varint
from logbroker.protocol.apis import make_message

from logsim.network import CONTROL, SimNetwork
from logsim.node import EPOCH_MS

PORT = 9092
PRODUCE, FETCH, LIST_OFFSETS, METADATA, INIT_PID = 0, 1, 2, 3, 22
#: errors a broker gives only before it appends: the attempt was certainly not written, retry it
REFUSED = {3, 5, 19, 74}  # unknown partition, leader not available, not enough replicas, fenced leader epoch
#: errors after which an attempt may have been written, and retrying is still safe (idempotence)
RETRY_MAYBE = {7, 20}  # request timed out (after the append), not enough replicas after append
#: NOT_LEADER_OR_FOLLOWER: before the append (a stale view), or after it (leadership moved while the
#: request waited for its ISR); the client cannot tell which, so it refreshes metadata and retries
NOT_LEADER = 6
DEFINITE = {10, 2, 87, 21}  # message too large, corrupt, invalid record, invalid required acks


FETCH_PARTITION_BYTES = 1 << 14


RECORDS_AT = 61  # a v2 batch's records start after its fixed header


def iter_records(data: bytes) -> Iterator[tuple[int, int]]:
    """(offset, value) of every record in uncompressed v2 batches whose values are decimal integers
    (what the simulated producer writes), decoded as they are asked for; other batches go through
    kafka-python's reader."""
    for pos, h in iter_batches(data, verify_crc=False):
        if h.attributes & 0x07:  # compressed: not ours, read it the slow way
            yield from ((r.offset, int(r.value)) for r in DefaultRecordBatch(bytes(data[pos:pos + h.size])))
            continue
        p = pos + RECORDS_AT
        for _ in range(h.record_count):
            length, p = _varint(data, p)
            end = p + length
            p += 1  # attributes
            _, p = _varint(data, p)  # timestamp delta
            delta, p = _varint(data, p)
            klen, p = _varint(data, p)
            p += max(klen, 0)
            vlen, p = _varint(data, p)
            yield h.base_offset + delta, int(data[p:p + vlen])
            p = end


def decode_records(data: bytes) -> list[tuple[int, int]]:
    return list(iter_records(data))


def iter_committed(data: bytes, aborted: list[tuple[int, int]]) -> Iterator[tuple[int, int | None, int]]:
    """A read_committed consumer's view of one fetch: `(offset, value, next offset)` per record it
    returns, `(first offset, None, next offset)` per batch it passes over unseen — a control batch
    (a transaction marker) or a batch of an aborted transaction. `aborted` is the fetch's list of
    (producer id, first offset): a producer's batches from that offset on are skipped until its ABORT
    marker (KIP-98's consumer side, as librdkafka and the Java consumer do it)."""
    ahead = sorted(aborted, key=lambda a: a[1])
    skipping: set[int] = set()
    for pos, h in iter_batches(data, verify_crc=False):
        while ahead and ahead[0][1] <= h.last_offset:
            skipping.add(ahead.pop(0)[0])
        raw = bytes(data[pos:pos + h.size])
        if h.is_control:
            marker = read_marker(raw, h)
            if marker is not None and not marker.commit:
                skipping.discard(h.producer_id)
            yield h.base_offset, None, h.next_offset
        elif h.is_transactional and h.producer_id in skipping:
            yield h.base_offset, None, h.next_offset
        else:
            yield from ((r.offset, int(r.value), r.offset + 1) for r in DefaultRecordBatch(raw))


class Prefetched:
    """A fetch's records for one key, decoded only as far as polls read them: a poll takes at most
    `max_records`, and a fetch of `FETCH_PARTITION_BYTES` carries hundreds more that the next fetch
    replaces unread (decoding them all cost most of a busy consumer's time)."""

    __slots__ = ("_it",)

    def __init__(self, data: bytes, aborted: list[tuple[int, int]] | None = None) -> None:
        """`aborted`: None for read_uncommitted, else the fetch's aborted transactions (read_committed)."""
        self._it: Iterator[tuple[int, int | None, int]] | None = (
            ((o, v, o + 1) for o, v in iter_records(data)) if aborted is None else iter_committed(data, aborted))

    def pop(self) -> tuple[int, int | None, int] | None:
        """The next (offset, value or None when passed over unseen, next offset), or None when there is none."""
        if self._it is None:
            return None
        got = next(self._it, None)
        if got is None:
            self._it = None
        return got

    def clear(self) -> None:
        self._it = None


class ClientTimeout(Exception):
    """No answer in time: the request may or may not have been served."""


class SimKafkaClient:
    def __init__(self, net: SimNetwork, nodes: list[str], bootstrap: str, topic: str, rng: random.Random, *,
                 acks: int = -1, idempotent: bool = True, request_timeout_s: float = 3.0,
                 delivery_timeout_s: float = 5.0, host: str = CONTROL, read_committed: bool = False) -> None:
        self.net, self.nodes, self.bootstrap, self.topic, self.rng = net, nodes, bootstrap, topic, rng
        self.acks, self.idempotent = acks, idempotent
        self.request_timeout_s, self.delivery_timeout_s = request_timeout_s, delivery_timeout_s
        self.host = host
        self.read_committed = read_committed  # Fetch isolation_level=1: up to the LSO, aborted records dropped
        self.leaders: dict[int, str] = {}
        self.epochs: dict[int, int] = {}  # the highest leader epoch seen per partition (KIP-320)
        self.brokers: dict[int, str] = {}
        self.metadata_at = -1e9
        self.pid, self.pid_epoch = -1, -1
        self.seq: dict[int, int] = {}
        self.positions: dict[int, int] = {}
        self.buffered: dict[int, Prefetched] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.net.loop

    async def call(self, node: str, api_key: int, version: int, req: Any, timeout: float | None = None) -> Any:
        """One request to `node`; its response body (None for an acks=0 produce, which the broker
        never answers). ConnectionError or ClientTimeout otherwise."""
        try:
            got = await self.net.request(self.host, node, PORT, api_key, version, req,
                                         timeout or self.request_timeout_s)
        except TimeoutError:
            raise ClientTimeout(f"{node}: no answer in {timeout or self.request_timeout_s:g} s") from None
        if got is None:
            if api_key == PRODUCE and self.acks == 0:
                return None
            raise ConnectionError(f"{node}: no response")
        return got[1]

    # --- metadata --------------------------------------------------------------------------------
    async def refresh_metadata(self) -> bool:
        others = sorted(set(self.nodes) - {self.bootstrap})
        self.rng.shuffle(others)
        order = [self.bootstrap, *others]
        req = make_message(MetadataRequest, 7, {"topics": [{"name": self.topic}], "allow_auto_topic_creation": False})
        for node in order:
            try:
                body = await self.call(node, METADATA, 7, req)
            except (ConnectionError, ClientTimeout):
                continue
            if not body["brokers"]:  # a broker without a view of the cluster (the socket server closes the
                # connection instead of sending this, logbroker/server.py): ask another
                continue
            self.brokers = {int(b["node_id"]): str(b["host"]) for b in body["brokers"]}
            leaders: dict[int, str] = {}
            for t in body["topics"]:
                if t["name"] == self.topic and t["error_code"] == 0:
                    for p in t["partitions"]:
                        k, epoch = int(p["partition_index"]), int(p["leader_epoch"])
                        if epoch < self.epochs.get(k, -1):  # a stale view: keep the newer leader
                            if k in self.leaders:
                                leaders[k] = self.leaders[k]
                            continue
                        self.epochs[k] = epoch
                        if int(p["leader_id"]) in self.brokers:
                            leaders[k] = self.brokers[int(p["leader_id"])]
            self.leaders = leaders
            self.metadata_at = self.loop.time()
            return True
        return False

    async def leader(self, key: int, *, stale: bool = False) -> str | None:
        if stale or key not in self.leaders or self.loop.time() - self.metadata_at > 1.0:
            await self.refresh_metadata()
        return self.leaders.get(key)

    # --- producer --------------------------------------------------------------------------------
    async def _init_pid(self, deadline: float) -> bool:
        req = make_message(InitProducerIdRequest, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        while self.loop.time() < deadline:
            node = self.rng.choice(self.nodes)
            try:
                body = await self.call(node, INIT_PID, 1, req)
                if body["error_code"] == 0:
                    self.pid, self.pid_epoch = int(body["producer_id"]), int(body["producer_epoch"])
                    return True
            except (ConnectionError, ClientTimeout):
                pass
            await asyncio.sleep(0.1)
        return False

    def _batch(self, values: list[int], seq: int) -> bytes:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                      producer_id=self.pid if self.idempotent else -1,
                                      producer_epoch=self.pid_epoch if self.idempotent else -1,
                                      base_sequence=seq if self.idempotent else -1, batch_size=1 << 20)
        now_ms = EPOCH_MS + int(self.loop.time() * 1000)  # the control host's wall clock, simulated: with
        for i, v in enumerate(values):  # timestamp=None kafka-python reads the real one, and the logs differ
            b.append(i, timestamp=now_ms, key=None, value=str(v).encode(), headers=[])
        return bytes(b.build())

    async def send_many(self, sends: list[tuple[int, int]]) -> list[tuple[str, Any, str | None]]:
        """Produce every (key, value), all partitions at once; per send (outcome, offset, error)."""
        if not sends:
            return []
        deadline = self.loop.time() + self.delivery_timeout_s
        if self.idempotent and self.pid < 0 and not await self._init_pid(deadline):
            return [("fail", None, "no producer id") for _ in sends]
        by_key: dict[int, list[int]] = {}
        for i, (key, _) in enumerate(sends):
            by_key.setdefault(key, []).append(i)
        out: list[tuple[str, Any, str | None]] = [("info", None, None)] * len(sends)
        keys = sorted(by_key)
        results = await asyncio.gather(*(self._produce(k, [sends[i][1] for i in by_key[k]], deadline) for k in keys))
        for k, (typ, base, err) in zip(keys, results, strict=True):
            for j, i in enumerate(by_key[k]):
                out[i] = (typ, base + j if typ == "ok" and base is not None else None, err)
        return out

    async def _produce(self, key: int, values: list[int], deadline: float) -> tuple[str, int | None, str | None]:
        seq = self.seq.get(key, 0)
        self.seq[key] = seq + len(values)
        records = self._batch(values, seq)
        req = make_message(ProduceRequest, 7, {
            "transactional_id": None, "acks": self.acks, "timeout_ms": int(self.request_timeout_s * 1000),
            "topic_data": [{"name": self.topic, "partition_data": [{"index": key, "records": records}]}]})
        maybe_written = False
        last = "message timed out"
        stale = False
        while self.loop.time() < deadline:
            node = await self.leader(key, stale=stale)
            stale = False
            if node is None:
                last = "leader not available"
                await asyncio.sleep(0.1)
                continue
            try:
                body = await self.call(node, PRODUCE, 7, req, min(self.request_timeout_s + 0.5,
                                                                  max(0.01, deadline - self.loop.time())))
            except ClientTimeout as e:
                maybe_written, stale, last = True, True, str(e)
                continue
            except ConnectionError as e:
                stale, last = True, str(e)
                await asyncio.sleep(0.1)
                continue
            if self.acks == 0:
                return "info", None, None
            r = body["responses"][0]["partition_responses"][0]
            err = int(r["error_code"])
            if err == 0:
                return "ok", int(r["base_offset"]), None
            last = f"error {err}"
            if err in REFUSED or err == NOT_LEADER:
                maybe_written = maybe_written or err == NOT_LEADER
                stale = True
                await asyncio.sleep(0.1)
                continue
            if err in RETRY_MAYBE:
                maybe_written = True
                await asyncio.sleep(0.1)
                continue
            if err in DEFINITE and not maybe_written:
                return "fail", None, last
            return "info", None, last
        return ("info" if maybe_written else "fail"), None, last

    # --- consumer --------------------------------------------------------------------------------
    def assign(self, keys: list[int]) -> None:
        want = set(keys)
        self.positions = {k: self.positions.get(k, 0) for k in sorted(want)}
        self.buffered = {k: v for k, v in self.buffered.items() if k in want}

    async def poll(self, timeout_s: float, max_records: int = 50) -> dict[str, list[list[int]]]:
        """Up to `max_records` records in offset order per key: first what earlier fetches brought
        (librdkafka's prefetch queue), then long-polls to the leaders until something comes."""
        out: dict[str, list[list[int]]] = {}
        deadline = self.loop.time() + timeout_s
        count = 0
        while True:
            for k in self.positions:
                buf = self.buffered.get(k)
                while buf is not None and count < max_records:
                    rec = buf.pop()
                    if rec is None:
                        break
                    off, v, nxt = rec
                    if nxt <= self.positions[k]:
                        continue  # the batch began before our position
                    if off > self.positions[k]:
                        buf.clear()
                        break
                    self.positions[k] = nxt
                    if v is not None:  # None: a marker or an aborted batch, passed over unseen
                        out.setdefault(str(k), []).append([off, v])
                        count += 1
            if out or self.loop.time() >= deadline:
                return out
            by_leader: dict[str, list[int]] = {}
            for k in self.positions:
                node = await self.leader(k)
                if node is not None:
                    by_leader.setdefault(node, []).append(k)
            if not by_leader:
                await asyncio.sleep(0.1)
                continue
            wait_ms = max(0, min(100, int((deadline - self.loop.time()) * 1000)))
            got = await asyncio.gather(*(self._fetch(n, ks, wait_ms) for n, ks in sorted(by_leader.items())))
            for part in got:
                for k, recs in part.items():
                    if k in self.positions:
                        self.buffered[k] = recs

    async def _fetch(self, node: str, keys: list[int], wait_ms: int) -> dict[int, Prefetched]:
        req = make_message(FetchRequest, 11, {
            "replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": int(self.read_committed),
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": self.topic, "partitions": [
                {"partition": k, "current_leader_epoch": self.epochs.get(k, -1), "fetch_offset": self.positions[k],
                 "log_start_offset": -1,
                 "partition_max_bytes": FETCH_PARTITION_BYTES} for k in keys]}]})
        try:
            body = await self.call(node, FETCH, 11, req, self.request_timeout_s)
        except (ConnectionError, ClientTimeout):
            self.metadata_at = -1e9
            return {}
        out: dict[int, Prefetched] = {}
        for t in body.get("responses", []):
            for p in t["partitions"]:
                k, err = int(p["partition_index"]), int(p["error_code"])
                if err == 1:  # OFFSET_OUT_OF_RANGE: auto.offset.reset=earliest
                    self.positions[k] = max(0, int(p.get("log_start_offset", 0)))
                    continue
                if err:
                    self.metadata_at = -1e9
                    continue
                aborted = [(int(a["producer_id"]), int(a["first_offset"]))
                           for a in p.get("aborted_transactions") or []] if self.read_committed else None
                out[k] = Prefetched(p["records"] or b"", aborted)
        return out

    async def high_watermarks(self, keys: list[int], patience_s: float = 60.0) -> dict[int, int]:
        """Each key's high watermark, asking again while leadership settles."""
        deadline = self.loop.time() + patience_s
        out: dict[int, int] = {}
        while True:
            for k in keys:
                if k in out:
                    continue
                node = await self.leader(k)
                if node is None:
                    continue
                req = make_message(ListOffsetsRequest, 2, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": self.topic, "partitions": [{"partition_index": k, "timestamp": -1}]}]})
                try:
                    body = await self.call(node, LIST_OFFSETS, 2, req)
                except (ConnectionError, ClientTimeout):
                    continue
                r = body["topics"][0]["partitions"][0]
                if int(r["error_code"]) == 0:
                    out[k] = int(r["offset"])
                else:
                    self.metadata_at = -1e9
            if len(out) == len(keys):
                return out
            if self.loop.time() > deadline:
                raise ClientTimeout(f"no high watermark for keys {sorted(set(keys) - set(out))}")
            await asyncio.sleep(0.5)
