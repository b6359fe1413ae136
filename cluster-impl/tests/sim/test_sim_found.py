"""What the simulator found in the clean broker, kept as seeds: each was a failure until its fix."""

from __future__ import annotations

import json
from pathlib import Path

from harness.provision.sim_screen import screen
from harness.sim_search import simulate
from kernel.nemesis import PlannedFault
from kernel.spec import build_spec

#: `chaos sim-search --first-seed 5000` (the default sim mix, 60 s at --rate 20), shrunk to two faults
SCHEDULE = json.loads("""[
 {"id": 4, "family": "power-loss", "kind": "all", "at_s": 50.299, "duration_s": 5.414,
  "targets": {"n1": {"role": "node", "node": "n1"}, "n2": {"role": "node", "node": "n2"},
              "n3": {"role": "node", "node": "n3"}},
  "params": {"order": ["n2", "n3", "n1"], "delays_s": [2.99, 0.35, 1.6]}},
 {"id": 5, "family": "partition", "kind": "zookeeper", "at_s": 58.716, "duration_s": 0.642,
  "targets": {"victim": {"role": "node", "node": "n2"}}, "params": {}}]""")


#: `chaos sim-search --first-seed 5078` (the default sim mix with stale-orders), shrunk to three faults
SCHEDULE_5109 = json.loads("""[
 {"id": 2, "family": "partition", "kind": "controller", "at_s": 39.641, "duration_s": 8.963,
  "targets": {"victim": {"role": "controller", "node": "n3"}}, "params": {}},
 {"id": 3, "family": "partition", "kind": "flaky", "at_s": 42.477, "duration_s": 4.95,
  "targets": {"victim": {"role": "node", "node": "n1"}}, "params": {"loss": 0.57}},
 {"id": 4, "family": "stale-orders", "kind": "controller", "at_s": 51.525, "duration_s": 0.351,
  "targets": {"restarted": {"role": "leader", "node": "n3", "key": 3}},
  "params": {"key": 3, "session_timeout_s": 6.0, "settle_s": 3.26}}]""")


def _recovers(seed: int, schedule: list[dict[str, object]], nemesis: str, tmp_path: Path) -> bool:
    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 60.0, "rate": 20.0, "seed": seed,
                       "nemesis": nemesis})
    _, meta = simulate(spec, tmp_path, [PlannedFault.from_json(f) for f in schedule])
    return bool(meta["recovered"] and meta["drained"])


def test_a_controller_whose_broker_watch_read_fails_still_sees_later_brokers(tmp_path: Path) -> None:
    """n2 takes over after a power loss and is cut from ZooKeeper for 0.6 s as n3 registers: the
    /brokers/ids watch fires, its re-read raises ConnectionLoss, and a watch is re-armed only by a
    successful read. The controller now runs the handler again until it succeeds; before, it never
    heard of a broker again, no partition got a leader and the drain could not finish."""
    assert _recovers(5026, SCHEDULE, "partition,pause,kill,clock,power-loss", tmp_path)


def test_the_cluster_recovers_after_an_isolated_controller_and_stale_orders(tmp_path: Path) -> None:
    """The controller's isolation, a flaky link and a cut-short stale-orders: the same lost watch
    (ConnectionLoss in the handler) kept the cluster from recovering."""
    assert _recovers(5109, SCHEDULE_5109, "partition,pause,kill,clock,power-loss,stale-orders", tmp_path)


#: `chaos sim-search --first-seed 30040` (the full default mix), seed 30105, shrunk to two faults
SCHEDULE_30105 = json.loads("""[
 {"id": 2, "family": "partition", "kind": "one", "at_s": 40.421, "duration_s": 7.05,
  "targets": {"victim": {"role": "node", "node": "n2"}}, "params": {}},
 {"id": 3, "family": "partition", "kind": "zookeeper", "at_s": 50.677, "duration_s": 0.339,
  "targets": {"victim": {"role": "node", "node": "n1"}}, "params": {}}]""")
FULL_MIX = "partition,pause,clock,kill,move,double-failover,lagging-follower,zombie,power-loss,isolate,stale-orders"


def test_an_alter_isr_the_controller_could_not_write_is_sent_again(tmp_path: Path) -> None:
    """n2 is cut off long enough to leave the ISRs, and rejoins; n1, leader and controller, proposes
    it back while a 0.3 s ZooKeeper cut makes its own write raise ConnectionLoss. That ended the
    AlterIsr task: n1's local ISR held n2 (an expansion counts at once), the controller's never did,
    and the cluster never looked recovered. The leader now sends the proposal until it is answered."""
    assert _recovers(30105, SCHEDULE_30105, FULL_MIX, tmp_path)


#: `chaos sim-search --first-seed 4 --nemesis double-failover,lagging-follower,stale-orders
#: --nemesis-interval 10 --rate 100` (the screen with G1a), shrunk: no fault could be dropped
SCHEDULE_4 = json.loads("""[
 {"id": 0, "family": "lagging-follower", "kind": "kill-leader", "at_s": 10.0, "duration_s": 21.746,
  "targets": {"leader": {"role": "leader", "node": "n3", "key": 1}}, "params": {"key": 1, "lag_s": 16.75}},
 {"id": 1, "family": "stale-orders", "kind": "controller", "at_s": 18.216, "duration_s": 45.0,
  "targets": {"restarted": {"role": "leader", "node": "n1", "key": 3}},
  "params": {"key": 3, "session_timeout_s": 6.0, "settle_s": 2.81}},
 {"id": 2, "family": "stale-orders", "kind": "controller", "at_s": 42.754, "duration_s": 0.351,
  "targets": {"restarted": {"role": "leader", "node": "n1", "key": 3}},
  "params": {"key": 3, "session_timeout_s": 6.0, "settle_s": 2.7}}]""")


def _screened(opts: dict[str, object], schedule: list[dict[str, object]], tmp_path: Path) -> dict[str, int]:
    spec = build_spec({"provisioner": "sim", "nodes": 3, **opts})
    run_dir, meta = simulate(spec, tmp_path, [PlannedFault.from_json(f) for f in schedule])
    assert meta["recovered"] and meta["drained"]
    return screen(run_dir)


def test_a_produce_answered_not_leader_after_its_append_is_not_a_failure(tmp_path: Path) -> None:
    """n3 appends two records and waits for its ISR; leadership moves and the purgatory answers
    NOT_LEADER_OR_FOLLOWER (as Kafka's DelayedProduce does). Every retry then went to a dead broker
    until the delivery timeout, and the client called the send `fail`, though the records survived
    on the new leader and were read: G1a on the correct cluster. That error may follow the append,
    so the outcome is now `info`."""
    opts = {"time_limit": 60.0, "rate": 100.0, "seed": 4, "nemesis": "double-failover,lagging-follower,stale-orders",
            "nemesis_interval": 10.0}
    assert _screened(opts, SCHEDULE_4, tmp_path) == {}


def test_acks_zero_sends_are_unknown_not_failed(tmp_path: Path) -> None:
    """An acks=0 produce has no answer. The client took the silence for a broken connection and sent
    the batch again until the delivery timeout, then called it `fail`: every send was written
    several times and read back (thousands of G1a and duplicates on a fault-free cluster)."""
    opts = {"time_limit": 10.0, "rate": 50.0, "seed": 5, "acks": "0", "idempotence": False, "nemesis": ""}
    assert _screened(opts, [], tmp_path) == {}
    [history_file] = tmp_path.glob("*/*/history.jsonl")
    history = history_file.read_text()
    assert '"type":"fail"' not in history and '"type":"info","f":"send"' in history


#: `chaos sim-search --first-seed 70150 --max-seeds 1` (the full default mix), shrunk to three faults
SCHEDULE_70150 = json.loads("""[
 {"id": 0, "family": "partition", "kind": "controller", "at_s": 10.0, "duration_s": 5.623,
  "targets": {"victim": {"role": "controller", "node": "n3"}}, "params": {}},
 {"id": 1, "family": "partition", "kind": "controller", "at_s": 20.233, "duration_s": 9.205,
  "targets": {"victim": {"role": "controller", "node": "n3"}}, "params": {}},
 {"id": 2, "family": "stale-orders", "kind": "controller", "at_s": 28.2, "duration_s": 22.5,
  "targets": {"restarted": {"role": "leader", "node": "n3", "key": 2}},
  "params": {"key": 2, "session_timeout_s": 6.0, "settle_s": 3.54}}]""")


def test_a_leader_under_min_isr_does_not_commit_what_an_eligible_leader_lacks(tmp_path: Path) -> None:
    """n3 restarts (stale-orders); the controller n2 shrinks chaos-0's ISR to [2] and keeps n3, which
    has offsets up to 179, as an eligible leader (KIP-966). n2 still took HW to its LEO 192 over its
    lone ISR, consumers read 179..191, n2 lost ZooKeeper and the next controller elected n3: offsets
    179..191 were written again in epoch 3 (inconsistent-offsets on the clean cluster). The leader
    now keeps HW while its committed ISR is under min.insync.replicas (KAFKA-15583)."""
    opts = {"time_limit": 60.0, "rate": 20.0, "seed": 70150, "nemesis_interval": 10.0,
            "nemesis": FULL_MIX + ",lose-unfsynced,disk-loss"}
    assert "inconsistent-offsets" not in _screened(opts, SCHEDULE_70150, tmp_path)


#: `chaos sim-search` over the full default mix with lose-unfsynced and disk-loss (seed 70017, the 18th
#: seed searched), shrunk to four faults; `docs/found/sim-seed-70017` is the run
SCHEDULE_70017 = json.loads("""[
 {"id": 0, "family": "lagging-follower", "kind": "kill-leader", "at_s": 10.0, "duration_s": 0.327,
  "targets": {"leader": {"role": "leader", "node": "n1", "key": 3}}, "params": {"key": 3, "lag_s": 15.92}},
 {"id": 1, "family": "disk-loss", "kind": "one", "at_s": 18.592, "duration_s": 2.372,
  "targets": {"victim": {"role": "node", "node": "n2"}}, "params": {"key": 0}},
 {"id": 2, "family": "lagging-follower", "kind": "kill-leader", "at_s": 37.512, "duration_s": 0.296,
  "targets": {"leader": {"role": "leader", "node": "n3", "key": 2}}, "params": {"key": 2, "lag_s": 13.94}},
 {"id": 3, "family": "kill", "kind": "leader", "at_s": 45.69, "duration_s": 0.297,
  "targets": {"victim": {"role": "leader", "node": "n3", "key": 2}}, "params": {}}]""")


def test_a_broker_that_lost_its_disk_hands_out_no_producer_id_again(tmp_path: Path) -> None:
    """n2 loses its disk and comes back. Its producer ids came from blocks persisted in its log
    directory, so it handed out its previous life's ids again; a new idempotent producer whose first
    batch matched an old producer's last one in a partition's producer state was answered as a
    duplicate, at the old batch's offset, and nothing was appended (lost-write, inconsistent-offsets
    on the clean cluster). Ids now come in blocks claimed from ZooKeeper's /latest_producer_id_block,
    which no disk loss rewinds (Kafka's ZooKeeper-mode ProducerIdManager)."""
    opts = {"time_limit": 60.0, "rate": 100.0, "seed": 70017, "nemesis_interval": 10.0,
            "nemesis": FULL_MIX + ",lose-unfsynced,disk-loss"}
    assert _screened(opts, SCHEDULE_70017, tmp_path) == {}


#: `chaos sim-search --first-seed 90885 --rate 20` (the only failure of the 1,000-seed campaign of
#: 2026-11-28, full mix with lose-unfsynced and disk-loss), shrunk to these four faults
SCHEDULE_90885 = json.loads("""[
 {"id": 0, "family": "partition", "kind": "controller", "at_s": 10.0, "duration_s": 7.673,
  "targets": {"victim": {"role": "controller", "node": "n2"}}, "params": {}},
 {"id": 1, "family": "pause", "kind": "controller", "at_s": 18.025, "duration_s": 8.388,
  "targets": {"victim": {"role": "controller", "node": "n1"}}, "params": {}},
 {"id": 2, "family": "disk-loss", "kind": "last-isr", "at_s": 44.829, "duration_s": 0.325,
  "targets": {"victim": {"role": "leader", "node": "n1", "key": 2}}, "params": {"key": 2, "lag_s": 17.8}},
 {"id": 3, "family": "lose-unfsynced", "kind": "one", "at_s": 39.538, "duration_s": 6.621,
  "targets": {"victim": {"role": "node", "node": "n3"}}, "params": {}}]""")


def test_a_broker_out_of_the_controllers_reach_for_a_while_still_gets_its_leader_and_isr(tmp_path: Path) -> None:
    """The controller n3 crashes and comes back while disk-loss's cuts keep the new controller n1
    from reaching its broker port for 15 s. The controller's channel gave up on a request after five
    attempts (21 s): n3 never got its LeaderAndIsr, never fetched again, and the cluster never
    recovered (`not-recovered` on the clean cluster). The channel now retries while the broker is
    live, as Kafka's ControllerChannelManager does."""
    opts = {"time_limit": 60.0, "rate": 20.0, "seed": 90885, "nemesis_interval": 10.0,
            "nemesis": FULL_MIX + ",lose-unfsynced,disk-loss"}
    assert _screened(opts, SCHEDULE_90885, tmp_path) == {}


#: `python -m harness.bench.coverage --seeds 200` (guided: a mutant of seed 44, 20 s at 20 ops/s), shrunk
#: to three faults: two overlapping stale-orders and a power loss of the broker the second one kills
SCHEDULE_44 = json.loads("""[
 {"id": 5, "family": "stale-orders", "kind": "controller", "at_s": 1.0, "duration_s": 67.5,
  "targets": {"restarted": {"role": "leader", "node": "n1", "key": 0}},
  "params": {"key": 0, "session_timeout_s": 6.0, "settle_s": 3.93}},
 {"id": 4, "family": "lose-unfsynced", "kind": "leader", "at_s": 10.406, "duration_s": 3.922,
  "targets": {"victim": {"role": "leader", "node": "n3", "key": 2}}, "params": {}},
 {"id": 3, "family": "stale-orders", "kind": "controller", "at_s": 14.49, "duration_s": 67.5,
  "targets": {"restarted": {"role": "leader", "node": "n1", "key": 0}},
  "params": {"key": 0, "session_timeout_s": 6.0, "settle_s": 3.93}}]""")


def test_a_restarted_broker_takes_no_order_before_it_registered(tmp_path: Path) -> None:
    """n3, restarted while its old registration had not yet expired, took a LeaderAndIsr from n1 — the
    controller before last, cut off from ZooKeeper and addressing n3's earlier registration — before
    n3 had registered, so no broker epoch could call it stale. n3 followed n1's zombie leader of key 0,
    the two acknowledged records with acks=all that the real leader (n2) never had, and they were
    truncated when both followed n2: `unseen` 6, on every key, after a complete drain. The broker now waits for its
    registration before it acts on a controller request (Kafka's serves no request before)."""
    spec = build_spec({"provisioner": "sim", "nodes": 3, "time_limit": 20.0, "rate": 20.0, "seed": 44,
                       "nemesis_interval": 5.0, "name": "coverage-bench"})
    run_dir, meta = simulate(spec, tmp_path, [PlannedFault.from_json(f) for f in SCHEDULE_44])
    hits = [json.loads(f.read_text())["counts"] for f in sorted((run_dir / "replicas").glob("*/probes.json"))]
    assert sum(h.get("controller-request-before-registration", 0) for h in hits) > 0  # the window was met
    assert meta["drained"] and screen(run_dir) == {}
