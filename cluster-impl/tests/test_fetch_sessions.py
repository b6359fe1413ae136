"""Fetch sessions (KIP-227) and the replica fetcher's decisions, sans-IO.

The follower's `FetcherState` talks to a real `BrokerCore` in this process, through kafka-python's
Fetch classes but without sockets: what matters is what goes on the wire — the first request names
every partition, later ones only those whose position moved, and a response names only partitions
with something new. That is what makes 160 idle partitions cost nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from logbroker.config import DEFAULTS, from_mapping
from logbroker.core.broker import BrokerCore
from logbroker.core.clock import ManualClock
from logbroker.core.fetch_session import FetchSessionCache, SessionPartition
from logbroker.core.partition import TopicPartition
from logbroker.protocol.apis import make_message
from logbroker.protocol.errors import Err
from logbroker.replication.fetch_state import FetcherState, FetchStatus
from logbroker.replication.fetcher import FetcherSettings, fetch_request
from rawclient import batch, produce_req

N = 50
TOPIC = "t"


def sp(offset: int) -> SessionPartition:
    return SessionPartition(offset, 1 << 20)


# --- the leader's session cache ----------------------------------------------------------------------
def test_session_lifecycle() -> None:
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, {("t", 0): sp(0), ("t", 1): sp(0)}, [], now_ms=0)
    assert full.full and full.response_session_id != 0 and set(full.partitions) == {("t", 0), ("t", 1)}
    sid = full.response_session_id
    inc = cache.new_context(sid, 1, {("t", 1): sp(5)}, [("t", 0)], now_ms=1)
    assert not inc.full and inc.error == Err.NONE
    assert set(inc.partitions) == {("t", 1)} and inc.partitions[("t", 1)].fetch_offset == 5, "updated and forgotten"
    assert cache.new_context(sid, 1, {}, [], now_ms=2).error == Err.INVALID_FETCH_SESSION_EPOCH, "epoch replayed"
    assert cache.new_context(sid, 2, {}, [], now_ms=2).error == Err.NONE
    assert cache.new_context(sid + 100, 1, {}, [], now_ms=2).error == Err.FETCH_SESSION_ID_NOT_FOUND
    closed = cache.new_context(sid, -1, {("t", 0): sp(0)}, [], now_ms=3)
    assert closed.full and closed.response_session_id == 0 and len(cache) == 0
    assert cache.new_context(sid, 3, {}, [], now_ms=3).error == Err.FETCH_SESSION_ID_NOT_FOUND


def test_sessionless_fetch_leaves_no_session() -> None:
    cache = FetchSessionCache()
    ctx = cache.new_context(0, -1, {("t", 0): sp(0)}, [], now_ms=0)
    assert ctx.full and ctx.response_session_id == 0 and len(cache) == 0


def test_full_cache_evicts_only_idle_sessions() -> None:
    cache = FetchSessionCache(max_sessions=2, evict_after_ms=1000)
    a = cache.new_context(0, 0, {("t", 0): sp(0)}, [], now_ms=0).response_session_id
    b = cache.new_context(0, 0, {("t", 0): sp(0)}, [], now_ms=10).response_session_id
    assert cache.new_context(0, 0, {("t", 0): sp(0)}, [], now_ms=500).response_session_id == 0, \
        "nobody idle long enough: served without a session"
    cache.new_context(a, 1, {}, [], now_ms=600)  # a is used again: b is now the least recently used
    c = cache.new_context(0, 0, {("t", 0): sp(0)}, [], now_ms=1200).response_session_id
    assert c not in (0, a, b) and set(cache.sessions) == {a, c}


# --- a follower's fetcher against a real core -----------------------------------------------------------
@pytest.fixture
def core(tmp_path: Path) -> BrokerCore:
    cfg = from_mapping({**DEFAULTS, "log.dirs": str(tmp_path), "broker.id": "1"})
    c = BrokerCore(cfg, ManualClock(1000))
    c.replication.start()  # type: ignore[attr-defined]
    c.create_local_topic(TOPIC, N)
    return c


def roundtrip(core: BrokerCore, state: FetcherState, settings: FetcherSettings) -> tuple[dict[str, Any], Any]:
    plan = state.plan()
    assert plan is not None
    body = fetch_request(settings, plan)
    reply = core.handle(1, 11, make_message(FetchRequest, 11, body))
    assert reply.body is not None, "max_wait_ms=0 answers at once"
    resp = make_message(FetchResponse, 11, reply.body)
    state.session.on_response(resp.error_code, resp.session_id)
    for t in resp.responses:
        for pr in t.partitions:
            key = (t.topic, pr.partition_index)
            if pr.error_code:
                state.partition_error(key, pr.error_code, now_ms=0)
            elif pr.records:
                state.advanced(key, plan.positions[key].fetch_offset + 1)  # one record per batch below
    return body, resp


def named(body_or_resp: Any, field: str = "partitions") -> set[tuple[str, int]]:
    if isinstance(body_or_resp, dict):
        return {(t["topic"], p["partition"]) for t in body_or_resp["topics"] for p in t["partitions"]}
    return {(t.topic, p.partition_index) for t in body_or_resp.responses for p in t.partitions}


def test_idle_partitions_cost_nothing_once_the_session_is_open(core: BrokerCore) -> None:
    settings = FetcherSettings(broker_id=2, wait_ms=0)
    state = FetcherState()
    for i in range(N):
        state.add((TOPIC, i), 0, 0)
        state.truncated((TOPIC, i), 0, 0)
    body, resp = roundtrip(core, state, settings)
    assert body["session_epoch"] == 0 and len(named(body)) == N, "the first request is full"
    assert resp.session_id != 0 and len(named(resp)) == N, "and so is its response"

    body, resp = roundtrip(core, state, settings)
    assert body["session_id"] == resp.session_id and body["session_epoch"] == 1
    assert named(body) == set() and named(resp) == set(), "idle: nothing either way"

    core.handle(0, 7, produce_req(TOPIC, 7, batch([b"x"])))
    body, resp = roundtrip(core, state, settings)
    assert named(body) == set() and named(resp) == {(TOPIC, 7)}, "only the partition with new records"
    assert [p.records for t in resp.responses for p in t.partitions][0], "with its records"

    body, resp = roundtrip(core, state, settings)
    assert named(body) == {(TOPIC, 7)}, "the follower reports its new position for that partition only"
    assert named(resp) == set()


def test_a_refused_partition_is_forgotten_and_retried_after_a_backoff(core: BrokerCore) -> None:
    settings = FetcherSettings(broker_id=2, wait_ms=0)
    state = FetcherState(backoff_ms=100)
    for i in range(3):
        state.add((TOPIC, i), 0, 0)
        state.truncated((TOPIC, i), 0, 0)
    state.add(("gone", 0), 0, 0)
    state.truncated(("gone", 0), 0, 0)
    roundtrip(core, state, settings)
    assert state.partitions[("gone", 0)].status is FetchStatus.DELAYED
    body, _ = roundtrip(core, state, settings)
    assert body["forgotten_topics_data"] == [{"topic": "gone", "partitions": [0]}]
    state.wake_delayed(now_ms=99)
    assert state.partitions[("gone", 0)].status is FetchStatus.DELAYED
    state.wake_delayed(now_ms=100)
    assert state.partitions[("gone", 0)].status is FetchStatus.FETCHING


def test_fenced_epoch_truncates_again_and_a_lost_response_reopens_the_session(core: BrokerCore) -> None:
    settings = FetcherSettings(broker_id=2, wait_ms=0)
    state = FetcherState(backoff_ms=10)
    state.add((TOPIC, 0), 5, 0)  # an epoch the leader (at 0) has not reached: UNKNOWN_LEADER_EPOCH
    state.add((TOPIC, 1), 0, 0)
    assert state.to_truncate() == {(TOPIC, 0): 5, (TOPIC, 1): 0}, "a new follower truncates first"
    state.truncated((TOPIC, 0), 5, 0)
    state.truncated((TOPIC, 1), 0, 0)
    roundtrip(core, state, settings)
    assert state.partitions[(TOPIC, 0)].status is FetchStatus.DELAYED
    state.failed(now_ms=0)
    assert state.plan() is None, "everything backs off after a failed request"
    state.wake_delayed(now_ms=10)
    plan = state.plan()
    assert plan is not None and plan.full and plan.session_epoch == 0, "the next request is full again"


def test_truncation_rounds_skip_a_partition_readded_at_a_new_epoch() -> None:
    state = FetcherState()
    state.add((TOPIC, 0), 1, 10)
    state.add((TOPIC, 0), 2, 10)  # LeaderAndIsr again before truncation finished
    state.truncated((TOPIC, 0), 1, 7)
    assert state.partitions[(TOPIC, 0)].status is FetchStatus.TRUNCATING, "an older epoch's cut is ignored"
    state.truncated((TOPIC, 0), 2, 7)
    assert state.fetchable()[(TOPIC, 0)].fetch_offset == 7


def test_incremental_response_rotates_served_partitions(core: BrokerCore) -> None:
    """Partitions that returned records go to the back, so a byte budget cannot starve the rest."""
    ctx = core.fetch_sessions.new_context(0, 0, {(TOPIC, i): sp(0) for i in range(3)}, [], now_ms=0)
    for i in range(3):
        core.handle(0, 7, produce_req(TOPIC, i, batch([b"x" * 100])))
    core._fetch_response(ctx, replica_id=2, max_bytes=1)  # budget for one partition only
    assert list(ctx.partitions) == [(TOPIC, 1), (TOPIC, 2), (TOPIC, 0)]
    assert core.partitions[TopicPartition(TOPIC, 0)].leo == 1


def test_only_the_first_partition_may_exceed_the_response_budget(core: BrokerCore) -> None:
    """KIP-74: the first partition with data returns a batch however large; the others only what fits
    in the rest of the request's max_bytes (a response over the client's receive.message.max.bytes is
    dropped by librdkafka and asked again forever)."""
    ctx = core.fetch_sessions.new_context(0, 0, {(TOPIC, i): sp(0) for i in range(3)}, [], now_ms=0)
    for i in range(3):
        core.handle(0, 7, produce_req(TOPIC, i, batch([b"x" * 1000])))
    body = core._fetch_response(ctx, replica_id=2, max_bytes=1500)
    sizes = {p["partition_index"]: len(p["records"]) for t in body["responses"] for p in t["partitions"]}
    assert sizes[0] > 1000 and sizes.get(1, 0) == 0 and sizes.get(2, 0) == 0
    body = core._fetch_response(ctx, replica_id=2, max_bytes=1)  # over budget at once: still one batch
    assert sum(len(p["records"]) for t in body["responses"] for p in t["partitions"]) > 1000
