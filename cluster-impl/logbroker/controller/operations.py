"""What an operator asks the controller to do: add partitions (seed 003 H), move replicas (F), and
elect leaders (preferred, unclean, and Kafka's automatic leader rebalance).

Each request arrives one of two ways, and both end in the same code:
- through the metadata store, as seed 003 describes (`/admin/partitions_add`,
  `/admin/partitions_reassigned`, `/admin/preferred_replica_election`): the controller watches
  those paths and deletes each entry once it is done;
- through the Kafka admin APIs (CreatePartitions, AlterPartitionReassignments,
  ListPartitionReassignments, ElectLeaders), which reach the controller broker directly.

Every step writes the store before it tells any broker, so a controller that dies half-way leaves
enough behind for the next one to finish (`resume`, seed 003 D steps 7-9).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Sequence

from logbroker.controller.decisions import ElectionType, imbalanced, place_replicas, requested_election
from logbroker.controller.reassignment import completion_state, start_state, validate_target
from logbroker.controller.state import ControllerPrimitives, Key
from logbroker.coord import paths
from logbroker.coord.model import PartitionState, ReplicaAssignment
from logbroker.probes import probe
from logbroker.protocol.errors import Err

log = logging.getLogger(__name__)
_UNCLEAN = probe("unclean-leader-election")
_PREFERRED = probe("preferred-leader-election")
_MOVED = probe("reassignment-completed")
_FAILOVER_MOVING = probe("controller-failover-during-reassignment")

Outcome = tuple[Err, str | None]
OK: Outcome = (Err.NONE, None)


class Operations:
    """Operator requests, written against `ControllerPrimitives` (state.py), not `Controller`."""

    def __init__(self, ctl: ControllerPrimitives) -> None:
        self.ctl = ctl

    async def resume(self) -> None:
        """Called by a new controller with the lock held: pick up what the store says is pending."""
        await self._on_reassignments_changed()
        if self.ctl.state is not None and self.ctl.state.epoch > 1 and self.ctl.state.reassignments:
            _FAILOVER_MOVING()  # found moves under way (the tick completes them later)
        await self._on_partitions_add_changed()
        await self._on_preferred_election_changed()

    # --- partition add (H) -----------------------------------------------------------------------
    async def on_partitions_add_changed(self) -> None:
        async with self.ctl.lock:
            await self._on_partitions_add_changed()

    async def _on_partitions_add_changed(self) -> None:
        st = self.ctl.state
        if st is None:
            return
        entries = await self.ctl.store(self.ctl.zk.admin_requests, paths.PARTITIONS_ADD,
                                       self.ctl.watch("partitions_add", self.on_partitions_add_changed))
        by_topic: dict[str, dict[int, list[int]]] = {}
        for (t, p), replicas in entries.items():
            by_topic.setdefault(t, {})[p] = replicas
        for topic, new in sorted(by_topic.items()):
            fresh = {p: r for p, r in new.items() if (topic, p) not in st.partitions}
            if fresh:
                err, msg = await self._add_partitions(topic, fresh)
                if self.ctl.state is None:
                    return  # we lost the controller role: the request stays for the next controller
                if err != Err.NONE:
                    log.warning("partition add for %s %s refused: %s (%s)", topic, sorted(fresh), err.name, msg)
            for p in new:  # done, refused or already there: the request is consumed either way
                await self.ctl.store(self.ctl.zk.delete_admin_request, paths.PARTITIONS_ADD, topic, p)

    async def create_partitions(self, topic: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> Outcome:
        """The CreatePartitions API: grow `topic` to `count` partitions."""
        async with self.ctl.lock:
            st = self.ctl.state
            if st is None:
                return Err.NOT_CONTROLLER, "this broker is not the controller"
            current = sorted(p for t, p in st.partitions if t == topic)
            if topic not in st.topic_versions:
                return Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
            if count <= len(current):
                return Err.INVALID_PARTITIONS, f"topic {topic!r} has {len(current)} partitions; {count} is not more"
            n = count - len(current)
            rf = len(st.partitions[(topic, 0)].assignment.original) if current else 1
            if assignments:
                if len(assignments) != n:
                    return Err.INVALID_REPLICA_ASSIGNMENT, f"{len(assignments)} assignments for {n} new partitions"
                new = {len(current) + i: list(a) for i, a in enumerate(assignments)}
            else:
                live = sorted(st.brokers)
                if rf > len(live):
                    return Err.INVALID_REPLICATION_FACTOR, f"replication factor {rf} > {len(live)} live brokers"
                new = place_replicas(n, rf, live, start=zlib.crc32(topic.encode()) % len(live), first=len(current))
            if validate_only:
                return self._validate_add(topic, new)
            return await self._add_partitions(topic, new)

    def _validate_add(self, topic: str, new: dict[int, list[int]]) -> Outcome:
        st = self.ctl.state
        assert st is not None
        existing = sorted(p for t, p in st.partitions if t == topic)
        if topic not in st.topic_versions:
            return Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
        if sorted(new) != list(range(len(existing), len(existing) + len(new))):
            return Err.INVALID_PARTITIONS, f"new partitions {sorted(new)} do not continue 0..{len(existing) - 1}"
        if any(st.partitions[(topic, p)].assignment.moving or (topic, p) in st.reassignments for p in existing):
            return Err.REASSIGNMENT_IN_PROGRESS, f"a partition of {topic!r} is being reassigned"
        rf = len(st.partitions[(topic, existing[0])].assignment.original) if existing else None
        for p, replicas in sorted(new.items()):
            if not replicas or len(set(replicas)) != len(replicas):
                return Err.INVALID_REPLICA_ASSIGNMENT, f"partition {p}: bad replica list {replicas}"
            if rf is not None and len(replicas) != rf:
                return Err.INVALID_REPLICA_ASSIGNMENT, f"partition {p}: {len(replicas)} replicas, the topic has {rf}"
            dead = sorted(set(replicas) - st.live)
            if dead:
                return Err.INVALID_REPLICA_ASSIGNMENT, f"partition {p}: brokers {dead} are not alive"
        return OK

    async def _add_partitions(self, topic: str, new: dict[int, list[int]]) -> Outcome:
        """Seed 003 H, in a crash-safe order: the topic znode first (the commit point: a controller that
        finds a partition there without a state initialises it, B), then the states, then LeaderAndIsr."""
        st = self.ctl.state
        assert st is not None
        err, msg = self._validate_add(topic, new)
        if err != Err.NONE:
            return err, msg
        added = {p: ReplicaAssignment(tuple(r)) for p, r in new.items()}
        if not await self.ctl.write_assignment(topic, added):
            return Err.NOT_CONTROLLER, "lost the controller role while adding partitions"
        for p, asg in sorted(added.items()):
            await self.ctl.init_partition(topic, p, asg)
        log.info("topic %s: added partitions %s", topic, {p: r for p, r in sorted(new.items())})
        self.ctl.broadcast(only=[(topic, p) for p in new])
        return OK

    # --- elections ---------------------------------------------------------------------------
    async def on_preferred_election_changed(self) -> None:
        async with self.ctl.lock:
            await self._on_preferred_election_changed()

    async def _on_preferred_election_changed(self) -> None:
        if self.ctl.state is None:
            return
        keys = await self.ctl.store(self.ctl.zk.preferred_election_request,
                                    self.ctl.watch("preferred_election", self.on_preferred_election_changed))
        if keys is None:
            return
        results = await self._elect(ElectionType.PREFERRED, keys)
        if self.ctl.state is None:
            return  # we lost the controller role: the request stays for the next controller
        refused = {f"{t}-{p}": e.name for (t, p), (e, _) in results.items()
                   if e not in (Err.NONE, Err.ELECTION_NOT_NEEDED)}
        if refused:
            log.warning("preferred election: not done for %s", refused)
        # the deletion fires our watch once more; that run finds no znode and arms an exists-watch
        await self.ctl.store(self.ctl.zk.delete_preferred_election_request)

    async def elect_leaders(self, kind: ElectionType, keys: list[Key] | None) -> dict[Key, Outcome]:
        """The ElectLeaders API; `keys` None means every partition."""
        async with self.ctl.lock:
            if self.ctl.state is None:
                return {k: (Err.NOT_CONTROLLER, None) for k in keys or []}
            return await self._elect(kind, sorted(self.ctl.state.partitions) if keys is None else keys)

    async def _elect(self, kind: ElectionType, keys: Iterable[Key]) -> dict[Key, Outcome]:
        st = self.ctl.state
        assert st is not None
        results: dict[Key, Outcome] = {}
        changed = []
        for key in keys:
            info = st.partitions.get(key)
            if info is None:
                results[key] = (Err.UNKNOWN_TOPIC_OR_PARTITION, f"{key[0]}-{key[1]} does not exist")
                continue
            err, e = requested_election(kind, info.replicas, info.state, st.live)
            if e is None:
                results[key] = (err, None)
                continue
            if e.unclean:
                _UNCLEAN()
                log.warning("%s-%d: unclean leader election of %d requested by an operator", *key, e.leader)
            elif kind is ElectionType.PREFERRED:
                _PREFERRED()
            new = PartitionState(e.leader, info.state.leader_epoch + 1, e.isr, st.epoch)
            before = info.state.leader
            if not await self.ctl.write(key[0], key[1], info, new, unclean=e.unclean):
                results[key] = (Err.NOT_CONTROLLER, "lost the controller role")
                break
            log.info("%s-%d: %s election: leader %d -> %d", *key, kind.name.lower(), before, e.leader)
            results[key] = OK
            changed.append(key)
        if changed:
            self.ctl.broadcast(only=changed)
        return results

    async def auto_rebalance(self) -> None:
        """Kafka's auto.leader.rebalance.enable: move leadership back to preferred replicas when a
        broker leads too few of the partitions it is preferred for (not while they are moving)."""
        async with self.ctl.lock:
            st = self.ctl.state
            if st is None:
                return
            view = {k: (i.replicas, i.state) for k, i in st.partitions.items()
                    if k not in st.reassignments and not i.assignment.moving}
            keys = imbalanced(view, st.live, self.ctl.settings.leader_imbalance_per_broker_percentage)
            if keys:
                log.info("leader imbalance: preferred election for %s", [f"{t}-{p}" for t, p in keys])
                await self._elect(ElectionType.PREFERRED, keys)

    # --- reassignment (F) --------------------------------------------------------------------
    async def on_reassignments_changed(self) -> None:
        async with self.ctl.lock:
            await self._on_reassignments_changed()

    async def _on_reassignments_changed(self) -> None:
        st = self.ctl.state
        if st is None:
            return
        entries = await self.ctl.store(self.ctl.zk.admin_requests, paths.REASSIGN,
                                       self.ctl.watch("reassign", self.on_reassignments_changed))
        for key, target in sorted(entries.items()):
            if st.reassignments.get(key) == tuple(target):
                continue  # already ours (we wrote it, or saw it before)
            err, msg = await self._start(key, target, allow_rf_change=True)
            if self.ctl.state is None:
                return  # we lost the controller role: the request stays for the next controller
            if err != Err.NONE:
                log.warning("reassignment of %s-%d to %s refused: %s (%s)", *key, target, err.name, msg)
                await self.ctl.store(self.ctl.zk.delete_admin_request, paths.REASSIGN, *key)
        # a partition whose AR still says it is moving but has no request left (the request was
        # deleted by hand): finish the move to its recorded target
        for key, info in list(st.partitions.items()):
            if info.assignment.moving and key not in st.reassignments and key not in entries:
                st.reassignments[key] = info.assignment.target
        await self._complete_ready(list(st.reassignments))

    async def alter_reassignments(self, requests: dict[Key, list[int] | None], *,
                                  allow_rf_change: bool = True) -> dict[Key, Outcome]:
        """AlterPartitionReassignments: start (or redirect) a move; `None` cancels one (KIP-455: the
        partition goes back to its original replicas). The request is recorded in the store first,
        so a controller failover does not forget it."""
        async with self.ctl.lock:
            st = self.ctl.state
            if st is None:
                return {k: (Err.NOT_CONTROLLER, None) for k in requests}
            results: dict[Key, Outcome] = {}
            for key, target in sorted(requests.items()):
                info = st.partitions.get(key)
                if info is None:
                    results[key] = (Err.UNKNOWN_TOPIC_OR_PARTITION, f"{key[0]}-{key[1]} does not exist")
                    continue
                if target is None:
                    if key not in st.reassignments and not info.assignment.moving:
                        results[key] = (Err.NO_REASSIGNMENT_IN_PROGRESS, None)
                        continue
                    target = list(info.assignment.original)
                err, msg = validate_target(target, info.assignment, info.state, st.live,
                                           allow_rf_change=allow_rf_change)
                if err != Err.NONE:
                    results[key] = (err, msg)
                    continue
                await self.ctl.store(self.ctl.zk.put_admin_requests, paths.REASSIGN, {key: list(target)})
                results[key] = await self._start(key, target, allow_rf_change=allow_rf_change)
            await self._complete_ready([k for k, (e, _) in results.items() if e == Err.NONE])
            return results

    def list_reassignments(self, keys: list[Key] | None) -> dict[Key, ReplicaAssignment] | None:
        """ListPartitionReassignments; None when this broker is not the controller."""
        st = self.ctl.state
        if st is None:
            return None
        moving = set(st.reassignments) | {k for k, i in st.partitions.items() if i.assignment.moving}
        wanted = moving if keys is None else moving & set(keys)
        return {k: st.partitions[k].assignment for k in sorted(wanted) if k in st.partitions}

    async def _start(self, key: Key, target: Sequence[int], *, allow_rf_change: bool) -> Outcome:
        """Step 1 (see `reassignment.py`). With the lock held."""
        st = self.ctl.state
        assert st is not None
        info = st.partitions.get(key)
        if info is None:
            return Err.UNKNOWN_TOPIC_OR_PARTITION, f"{key[0]}-{key[1]} does not exist"
        err, msg = validate_target(target, info.assignment, info.state, st.live, allow_rf_change=allow_rf_change)
        if err != Err.NONE:
            return err, msg
        new = info.assignment.reassign_to(target)
        if not new.moving and new.replicas == info.assignment.replicas:
            # nothing to move (a cancel of a move that never started, or the current replicas again)
            st.reassignments.pop(key, None)
            await self.ctl.store(self.ctl.zk.delete_admin_request, paths.REASSIGN, *key)
            return OK
        st.reassignments[key] = tuple(target)
        if new == info.assignment:
            return OK  # resumed after a failover, or asked twice: already under way
        dropped = [r for r in info.assignment.replicas if r not in new.replicas]
        before = info.assignment
        info.assignment = new
        if not await self.ctl.write_assignment(key[0]):
            return Err.NOT_CONTROLLER, "lost the controller role"
        if not await self.ctl.write(key[0], key[1], info, start_state(info.state, new, st.live, st.epoch)):
            return Err.NOT_CONTROLLER, "lost the controller role"
        log.info("%s-%d: reassignment %s -> %s started (AR %s, adding %s, removing %s)", *key, list(before.replicas),
                 list(target), list(new.replicas), list(new.adding), list(new.removing))
        self.ctl.broadcast(only=[key])
        if dropped:  # replicas an earlier, unfinished move was adding, and this one does not want
            self.ctl.stop_replicas({b: [key] for b in dropped}, delete=True)
        return OK

    async def reassignment_tick(self, keys: list[Key] | None = None) -> None:
        """The reassignment agent's wake-up (seed 003 F): finish every move whose targets caught up."""
        async with self.ctl.lock:
            st = self.ctl.state
            if st is None or not st.reassignments:
                return
            await self._complete_ready(list(st.reassignments) if keys is None else keys)

    async def _complete_ready(self, keys: list[Key]) -> None:
        st = self.ctl.state
        for key in keys:
            if st is None or self.ctl.state is None:
                return
            info = st.partitions.get(key)
            if key not in st.reassignments or info is None:
                continue
            target = st.reassignments[key]
            new_state = completion_state(info.state, target, st.live, st.epoch)
            if new_state is None:
                continue
            removed = [r for r in info.assignment.replicas if r not in target]
            # leader and ISR inside the target first, then AR := target, then the request is gone
            if not await self.ctl.write(key[0], key[1], info, new_state):
                return
            info.assignment = info.assignment.completed(target)
            if not await self.ctl.write_assignment(key[0]):
                return
            await self.ctl.store(self.ctl.zk.delete_admin_request, paths.REASSIGN, *key)
            del st.reassignments[key]
            if removed:
                _MOVED()
            log.info("%s-%d: reassignment to %s complete (leader %d, epoch %d, ISR %s); stopping %s", *key,
                     list(info.assignment.replicas), new_state.leader, new_state.leader_epoch, list(new_state.isr),
                     removed)
            self.ctl.broadcast(only=[key])
            self.ctl.stop_replicas({b: [key] for b in removed}, delete=True)
