"""The admin APIs that move replicas and leaders, answered by the controller (as in Kafka's
ZooKeeper mode: a broker that is not the controller says NOT_CONTROLLER, and the client, which
learns the controller from Metadata, asks again there).

The controller works on its event loop and takes its lock, so the core gets a `Deferred` that the
purgatory completes when that work is done — or answers REQUEST_TIMED_OUT at the request's
timeout, while the work itself still finishes, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from logbroker.controller.controller import Controller
from logbroker.controller.decisions import ElectionType
from logbroker.core import admin
from logbroker.core.broker import BrokerCore, Reply
from logbroker.core.purgatory import Body, Deferred
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)
T = TypeVar("T")
NOT_CONTROLLER: admin.Outcome = (Err.NOT_CONTROLLER, "this broker is not the controller")
TIMED_OUT: admin.Outcome = (Err.REQUEST_TIMED_OUT, "the controller did not finish in time")


class ControllerAdmin:
    def __init__(self, core: BrokerCore, controller: Controller) -> None:
        self.core = core
        self.controller = controller

    def _later(self, version: int, timeout_ms: int, work: Awaitable[T], build: Callable[[T | None], Body]) -> Reply:
        task = asyncio.ensure_future(work)
        task.add_done_callback(lambda _t: self.core.purgatory.check())

        def complete(timed_out: bool) -> Body:
            if not task.done():
                return build(None)
            if task.cancelled() or task.exception() is not None:
                log.error("admin request failed in the controller",
                          exc_info=None if task.cancelled() else task.exception())
                return build(None)
            return build(task.result())

        deadline = self.core.clock.monotonic_ms() + admin.default_timeout_ms(timeout_ms)
        return Reply(version, deferred=self.core.purgatory.add(Deferred(task.done, complete, deadline, version)))

    # --- CreatePartitions (37) -----------------------------------------------------------------
    def create_partitions(self, version: int, req: Any) -> Reply:
        wanted = admin.create_partitions_requests(req)
        if not self.controller.active:
            return Reply(version, admin.create_partitions_body([(t, NOT_CONTROLLER) for t, _, _ in wanted]))

        async def work() -> list[tuple[str, admin.Outcome]]:
            return [(t, await self.controller.ops.create_partitions(t, n, a, bool(req.validate_only)))
                    for t, n, a in wanted]

        def build(res: list[tuple[str, admin.Outcome]] | None) -> Body:
            return admin.create_partitions_body(res if res is not None else [(t, TIMED_OUT) for t, _, _ in wanted])

        return self._later(version, req.timeout_ms, work(), build)

    # --- ElectLeaders (43) ---------------------------------------------------------------------
    def elect_leaders(self, version: int, req: Any) -> Reply:
        kind, keys = admin.elect_leaders_request(version, req)
        if not self.controller.active:
            return Reply(version, admin.elect_leaders_body({k: NOT_CONTROLLER for k in keys or []}, Err.NOT_CONTROLLER))
        try:
            election = ElectionType(kind)
        except ValueError:
            return Reply(version, admin.elect_leaders_body(
                {k: (Err.INVALID_REQUEST, f"unknown election type {kind}") for k in keys or []}, Err.INVALID_REQUEST))

        def build(res: dict[admin.Key, admin.Outcome] | None) -> Body:
            if res is None:
                return admin.elect_leaders_body({k: TIMED_OUT for k in keys or []})
            if keys is None:  # "all partitions": list only those an election was tried for
                res = {k: o for k, o in res.items() if o[0] != Err.ELECTION_NOT_NEEDED}
            return admin.elect_leaders_body(res)

        return self._later(version, req.timeout_ms, self.controller.ops.elect_leaders(election, keys), build)

    # --- AlterPartitionReassignments (45) ------------------------------------------------------
    def alter_partition_reassignments(self, version: int, req: Any) -> Reply:
        wanted, allow = admin.reassignment_requests(version, req)
        if not self.controller.active:
            return Reply(version, admin.alter_reassignments_body({}, NOT_CONTROLLER, allow))

        def build(res: dict[admin.Key, admin.Outcome] | None) -> Body:
            return admin.alter_reassignments_body(res if res is not None else {k: TIMED_OUT for k in wanted},
                                                  allow_rf_change=allow)

        work = self.controller.ops.alter_reassignments(wanted, allow_rf_change=allow)
        return self._later(version, req.timeout_ms, work, build)

    # --- ListPartitionReassignments (46) -------------------------------------------------------
    def list_partition_reassignments(self, version: int, req: Any) -> Reply:
        moving = self.controller.ops.list_reassignments(admin.list_reassignments_request(req))
        if moving is None:
            return Reply(version, admin.list_reassignments_body({}, NOT_CONTROLLER))
        return Reply(version, admin.list_reassignments_body(
            {k: (list(a.replicas), list(a.adding), list(a.removing)) for k, a in moving.items()}))

    # --- DeleteTopics (20) ---------------------------------------------------------------------
    def delete_topics(self, version: int, names: list[str], timeout_ms: int) -> Reply:
        from logbroker.core.topic_admin import TopicAdmin

        if not self.controller.active:
            return Reply(version, TopicAdmin.delete_topics_body({n: NOT_CONTROLLER for n in names}))

        async def work() -> dict[str, admin.Outcome]:
            return {n: await self.controller.delete_topic(n) for n in names}

        def build(res: dict[str, admin.Outcome] | None) -> Body:
            return TopicAdmin.delete_topics_body(res if res is not None else {n: TIMED_OUT for n in names})

        return self._later(version, timeout_ms, work(), build)

    # --- AlterConfigs (33), IncrementalAlterConfigs (44) for topics --------------------------------
    def alter_topic_configs(self, version: int, changes: dict[str, dict[str, str]],
                            body: Callable[[dict[str, admin.Outcome]], Body],
                            forward: Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]) -> Reply:
        """Any broker takes the request (kafka-python sends it to any); the controller stores it —
        here, or through an internal request to it."""

        async def work() -> dict[str, admin.Outcome]:
            if self.controller.active:
                return await self.controller.set_topic_configs(changes)
            reply = await forward({"type": "set_topic_configs", "topics": changes})
            if reply is None or "topics" not in reply:
                return {t: (Err.NOT_CONTROLLER, "the controller could not be reached") for t in changes}
            return {t: (Err(int(e)), m) for t, (e, m) in reply["topics"].items()}

        def build(res: dict[str, admin.Outcome] | None) -> Body:
            return body(res if res is not None else {t: TIMED_OUT for t in changes})

        return self._later(version, 30_000, work(), build)
