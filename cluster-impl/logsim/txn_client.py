"""`SimTxnProducer` and `read_committed`: a transactional Kafka client's semantics on the simulated
network, so the simulator runs the brokers' transaction code (coordinator and partitions) unchanged.

Model of the producer (what librdkafka and the Java client do, reduced to what a history can tell
apart; KIP-98, with KIP-890 part 2 when `end_version` is 5):
- the coordinator is found with FindCoordinator key type 1 (from any broker, seeded order), and found
  again after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a connection error or a timeout;
- `init()`: InitProducerId with the transactional id, asked again while the answer is retriable
  (CONCURRENT_TRANSACTIONS while the coordinator aborts a previous incarnation's transaction);
  sequences restart at 0;
- `transaction(writes, commit)`: AddPartitionsToTxn for the transaction's partitions, one
  transactional batch per partition to its leader (retried unchanged, same sequence, after retriable
  errors until the transaction's deadline), then EndTxn. EndTxn v5 hands back the bumped epoch (the
  sequences restart); earlier versions keep it, except after an abort of a transaction one of whose
  produces timed out: its fate is unknown and it may still arrive, so the producer bumps its epoch
  with InitProducerId carrying its producer id and epoch (KIP-360, as librdkafka does for timed-out
  messages and the Java client for expired batches) and the late write is fenced at the partition
  instead of joining the producer's next transaction there. The outcome is `committed` or `aborted` when the
  coordinator acknowledged that end; `aborted` also when a step failed before EndTxn(commit) was sent
  and the abort was acknowledged; `unknown` otherwise (the EndTxn answer never came, or the producer
  was fenced): such a transaction must be all or nothing, and the producer initializes again;
- every request has a timeout; nothing here reads a wall clock or draws from an unseeded stream.

`read_committed` reads partitions from the start up to each one's last stable offset with Fetch
isolation_level=1, dropping the records of aborted transactions as a consumer does (the fetch lists
each aborted transaction's producer and first offset; its ABORT marker ends it).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from kafka.protocol.admin.transactions import ListTransactionsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from logbroker.protocol.apis import make_message

from logsim.client import ClientTimeout, SimKafkaClient, iter_committed
from logsim.network import SimNetwork
from logsim.node import EPOCH_MS

PRODUCE, FETCH, LIST_OFFSETS, FIND_COORDINATOR, INIT_PID, ADD_PARTITIONS, END_TXN = 0, 1, 2, 10, 22, 24, 26
LIST_TRANSACTIONS = 66
#: coordinator errors that a new lookup may cure, and ones that only need another try
LOOK_AGAIN = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
TRY_AGAIN = {51, 7}  # CONCURRENT_TRANSACTIONS, REQUEST_TIMED_OUT
FENCED = {47, 90}  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
#: produce errors after which the same batch may be sent again
PRODUCE_RETRY = {3, 5, 6, 7, 19, 20, 74}


class Fenced(Exception):
    """Another incarnation (or the coordinator's timeout) took over this producer's epoch."""


class SimTxnProducer:
    def __init__(self, net: SimNetwork, nodes: list[str], topic: str, rng: random.Random, transactional_id: str, *,
                 timeout_ms: int = 10000, end_version: int = 5, request_timeout_s: float = 3.0,
                 produce_timeout_s: float | None = None) -> None:
        """`produce_timeout_s`: how long a transaction's writes are tried before the producer gives
        up and aborts (librdkafka's message.timeout.ms); the transaction timeout by default."""
        self.k = SimKafkaClient(net, nodes, nodes[0], topic, rng, request_timeout_s=request_timeout_s)
        self.nodes, self.topic, self.rng, self.tid = nodes, topic, rng, transactional_id
        self.timeout_ms, self.end_version = timeout_ms, end_version
        self.produce_timeout_s = timeout_ms / 1000 if produce_timeout_s is None else produce_timeout_s
        self.coordinator: str | None = None
        self.pid, self.epoch = -1, -1
        self.seq: dict[int, int] = {}
        self.offsets: dict[int, int] = {}  # partition -> base offset of the last transaction's batch there
        self.timed_out = False  # the last transaction had a produce that was never answered

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.k.loop

    # --- the coordinator -------------------------------------------------------------------------
    async def _find(self) -> str | None:
        req = make_message(FindCoordinatorRequest, 1, {"key": self.tid, "key_type": 1})
        order = list(self.nodes)
        self.rng.shuffle(order)
        for node in order:
            try:
                body = await self.k.call(node, FIND_COORDINATOR, 1, req)
            except (ConnectionError, ClientTimeout):
                continue
            if int(body["error_code"]) == 0 and int(body["node_id"]) > 0:
                return self.nodes[int(body["node_id"]) - 1]
        return None

    async def _ask(self, api_key: int, version: int, fields: dict[str, Any], deadline: float,
                   error_of: Any = None) -> dict[str, Any] | None:
        """A request to the coordinator until it answers something other than a retriable error or
        `deadline` passes (None: no definite answer)."""
        req = make_message({INIT_PID: InitProducerIdRequest, ADD_PARTITIONS: AddPartitionsToTxnRequest,
                            END_TXN: EndTxnRequest}[api_key], version, fields)
        while self.loop.time() < deadline:
            if self.coordinator is None:
                self.coordinator = await self._find()
                if self.coordinator is None:
                    await asyncio.sleep(0.1)
                    continue
            try:
                body = await self.k.call(self.coordinator, api_key, version, req)
            except (ConnectionError, ClientTimeout):
                self.coordinator = None
                await asyncio.sleep(0.1)
                continue
            err = error_of(body) if error_of is not None else int(body["error_code"])
            if err in LOOK_AGAIN:
                self.coordinator = None
            if err in LOOK_AGAIN or err in TRY_AGAIN:
                await asyncio.sleep(0.05)
                continue
            return dict(body)
        return None

    async def init(self, patience_s: float = 60.0, *, bump: bool = False) -> bool:
        """InitProducerId: a new incarnation, or with `bump` this one's epoch raised (KIP-360: the
        request names the producer id and epoch it has). Sequences restart either way."""
        pid, epoch = (self.pid, self.epoch) if bump else (-1, -1)
        body = await self._ask(INIT_PID, 4, {"transactional_id": self.tid, "transaction_timeout_ms": self.timeout_ms,
                                             "producer_id": pid, "producer_epoch": epoch},
                               self.loop.time() + patience_s)
        if body is None or int(body["error_code"]) != 0:
            return False
        self.pid, self.epoch, self.seq = int(body["producer_id"]), int(body["producer_epoch"]), {}
        return True

    # --- a transaction ---------------------------------------------------------------------------
    async def transaction(self, writes: list[tuple[int, int]], commit: bool) -> str:
        """Write every (partition, value) in one transaction, then commit or abort it: `committed`,
        `aborted` or `unknown` (see the module docstring)."""
        deadline = self.loop.time() + self.produce_timeout_s
        keys = sorted({k for k, _ in writes})
        self.offsets = {}
        self.timed_out = False
        try:
            ok = await self._add(keys, deadline)
            if ok:
                results = await asyncio.gather(*(self._produce(k, [v for kk, v in writes if kk == k], deadline)
                                                  for k in keys))
                ok = all(results)
            outcome = await self._end(commit and ok, deadline + 5, wanted=commit)
            if outcome == "aborted" and self.timed_out and self.end_version < 5 \
                    and not await self.init(patience_s=self.produce_timeout_s + 5, bump=True):
                self.pid = -1  # no bump: start a new incarnation before the next transaction
            return outcome
        except Fenced:
            self.pid = -1
            return "unknown"

    async def _add(self, keys: list[int], deadline: float) -> bool:
        def error_of(body: dict[str, Any]) -> int:
            return max(int(p["partition_error_code"]) for t in body["results_by_topic_v3_and_below"]
                       for p in t["results_by_partition"])

        body = await self._ask(ADD_PARTITIONS, 3, {
            "v3_and_below_transactional_id": self.tid, "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": self.topic, "partitions": keys}]}, deadline, error_of)
        if body is None:
            return False
        err = error_of(body)
        if err in FENCED:
            raise Fenced(f"AddPartitionsToTxn: error {err}")
        return err == 0

    def _batch(self, key: int, values: list[int]) -> bytes:
        seq = self.seq.get(key, 0)
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=self.pid,
                                      producer_epoch=self.epoch, base_sequence=seq, batch_size=1 << 20)
        now_ms = EPOCH_MS + int(self.loop.time() * 1000)
        for i, v in enumerate(values):
            b.append(i, timestamp=now_ms, key=None, value=str(v).encode(), headers=[])
        self.seq[key] = seq + len(values)
        return bytes(b.build())

    async def _produce(self, key: int, values: list[int], deadline: float) -> bool:
        records = self._batch(key, values)
        req = make_message(ProduceRequest, 7, {
            "transactional_id": self.tid, "acks": -1, "timeout_ms": int(self.k.request_timeout_s * 1000),
            "topic_data": [{"name": self.topic, "partition_data": [{"index": key, "records": records}]}]})
        stale = False
        while self.loop.time() < deadline:
            node = await self.k.leader(key, stale=stale)
            stale = False
            if node is None:
                await asyncio.sleep(0.1)
                continue
            try:
                body = await self.k.call(node, PRODUCE, 7, req)
            except (ConnectionError, ClientTimeout):
                stale = True
                await asyncio.sleep(0.1)
                continue
            r = body["responses"][0]["partition_responses"][0]
            err = int(r["error_code"])
            if err == 0:
                self.offsets[key] = int(r["base_offset"])
                return True
            if err in FENCED:
                raise Fenced(f"Produce: error {err}")
            if err not in PRODUCE_RETRY:
                return False
            stale = True
            await asyncio.sleep(0.1)
        self.timed_out = True  # sent, maybe more than once, never answered: it may still arrive
        return False

    async def _end(self, commit: bool, deadline: float, *, wanted: bool) -> str:
        """EndTxn; the outcome as the producer can know it."""
        body = await self._ask(END_TXN, self.end_version, {"transactional_id": self.tid, "producer_id": self.pid,
                                                           "producer_epoch": self.epoch, "committed": commit}, deadline)
        if body is None:
            self.pid = -1  # the end may or may not have been decided: start again
            return "unknown"
        err = int(body["error_code"])
        if err in FENCED:
            raise Fenced(f"EndTxn: error {err}")
        if err != 0:
            self.pid = -1
            return "unknown"
        if self.end_version >= 5:  # KIP-890 part 2: the coordinator bumped the epoch
            self.pid, self.epoch, self.seq = int(body["producer_id"]), int(body["producer_epoch"]), {}
        return "committed" if commit else "aborted"


async def read_committed(k: SimKafkaClient, keys: list[int], patience_s: float = 60.0) -> dict[int, list[int]]:
    """Every value a read_committed consumer returns from each partition's start to its LSO."""
    deadline = k.loop.time() + patience_s
    out: dict[int, list[int]] = {}
    for key in keys:
        out[key] = await _read_partition(k, key, deadline)
    return out


async def last_stable_offsets(k: SimKafkaClient, keys: list[int], committed: bool = True,
                              patience_s: float = 30.0) -> dict[int, int]:
    """Each partition's end at an isolation level (LSO, or HW); {} if some leader never answers."""
    deadline = k.loop.time() + patience_s
    out: dict[int, int] = {}
    while len(out) < len(keys) and k.loop.time() < deadline:
        for key in keys:
            if key in out:
                continue
            node = await k.leader(key, stale=True)
            if node is None:
                continue
            req = make_message(ListOffsetsRequest, 2, {"replica_id": -1, "isolation_level": int(committed), "topics": [
                {"name": k.topic, "partitions": [{"partition_index": key, "timestamp": -1}]}]})
            try:
                body = await k.call(node, LIST_OFFSETS, 2, req)
            except (ConnectionError, ClientTimeout):
                continue
            r = body["topics"][0]["partitions"][0]
            if int(r["error_code"]) == 0:
                out[key] = int(r["offset"])
        if len(out) < len(keys):
            await asyncio.sleep(0.5)
    return out if len(out) == len(keys) else {}


async def open_transactions(k: SimKafkaClient, nodes: list[str]) -> dict[str, str]:
    """Transactional id -> state of every transaction not Empty/Complete* that a broker coordinates,
    as ListTransactions (what `kafka-transactions.sh list` sends to every broker) answers."""
    req = make_message(ListTransactionsRequest, 0, {"state_filters": ["Ongoing", "PrepareCommit", "PrepareAbort"],
                                                    "producer_id_filters": []})
    out: dict[str, str] = {}
    for node in nodes:
        try:
            body = await k.call(node, LIST_TRANSACTIONS, 0, req)
        except (ConnectionError, ClientTimeout):
            continue
        out.update({str(t["transactional_id"]): str(t["transaction_state"]) for t in body["transaction_states"]})
    return out


async def _read_partition(k: SimKafkaClient, key: int, deadline: float) -> list[int]:
    values: list[int] = []
    position = 0
    while k.loop.time() < deadline:
        end = (await last_stable_offsets(k, [key], patience_s=max(0.1, deadline - k.loop.time()))).get(key)
        if end is not None and position >= end:
            return values
        node = await k.leader(key)
        if node is None:
            await asyncio.sleep(0.1)
            continue
        req = make_message(FetchRequest, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": k.topic, "partitions": [{"partition": key, "current_leader_epoch": -1,
                                                          "fetch_offset": position, "log_start_offset": -1,
                                                          "partition_max_bytes": 1 << 20}]}]})
        try:
            body = await k.call(node, FETCH, 11, req)
        except (ConnectionError, ClientTimeout):
            await asyncio.sleep(0.1)
            continue
        p = body["responses"][0]["partitions"][0] if body.get("responses") else None
        if p is None or int(p["error_code"]) != 0:
            k.metadata_at = -1e9
            await asyncio.sleep(0.1)
            continue
        aborted = [(int(a["producer_id"]), int(a["first_offset"])) for a in (p["aborted_transactions"] or [])]
        data = p["records"] or b""
        for _, v, nxt in iter_committed(data, aborted):
            if nxt <= position:
                continue
            if v is not None:
                values.append(v)
            position = nxt
        if not data:
            await asyncio.sleep(0.1)
    raise ClientTimeout(f"partition {key}: read_committed did not reach the LSO")
